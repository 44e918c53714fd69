package approvals

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/exechost/exechost/internal/policy"
)

// SameFile reports whether a and b name the same existing file (same
// device and inode, following symlinks). It is the filesystem check the
// pure matcher needs (policy.Allowlist.SameFile): on a case-insensitive
// filesystem "/x/Head" and "/x/head" are one file and the match stands; on
// a case-sensitive one they are two programs and it is refused. Anything
// that cannot be stat'ed is not the same file (fail closed).
func SameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false
	}
	return os.SameFile(fa, fb)
}

// maxNearMissEntries bounds how many directory entries one pattern's
// near-miss check reads (a bin directory holds a few thousand).
const maxNearMissEntries = 20000

// nearMissWarnings lists the files in pattern's literal directory that
// the pattern matches only when case is ignored and that are NOT the file
// it spells ("/usr/bin/head" vs "/usr/bin/HEAD" with libwww-perl): such
// files are refused, and the user should know the pattern does not cover
// them — or, when the pattern's own spelling does not exist, that it
// covers nothing there. Only the directory the pattern names literally
// is read; deeper globs are not walked.
// dirs memoises directory listings across the patterns of one Resolve.
func nearMissWarnings(pattern, home string, dirs map[string][]string) []string {
	p := policy.ExpandHome(strings.TrimSpace(pattern), home)
	if !strings.HasPrefix(p, "/") {
		return nil
	}
	dir := literalDir(path.Clean(p))
	names, ok := dirs[dir]
	if !ok {
		// A directory that cannot be read lists nothing (it may differ
		// from the real one in case only; the matcher refuses that too
		// unless it is the same directory).
		if f, err := os.Open(dir); err == nil {
			names, _ = f.Readdirnames(maxNearMissEntries)
			f.Close()
			slices.Sort(names)
		}
		dirs[dir] = names
	}
	var out []string
	for _, name := range names {
		full := path.Join(dir, name)
		v := policy.FoldMatch(pattern, full, home)
		if !v.Matched || !v.FoldOnly {
			continue
		}
		if v.Spelling != "" && SameFile(v.Spelling, full) {
			continue // a case-insensitive filesystem: one file, allowed
		}
		out = append(out, fmt.Sprintf("pattern %q matches %s only when case is ignored and it is a different file; it is NOT allowed (hint: add %q if you mean it)", pattern, full, full))
	}
	return out
}
