//go:build unix

package approvals

import (
	"fmt"
	"os"
	"path"
	"strings"
	"syscall"
)

// writableProblem walks from "/" down to dir and describes the first
// directory that users other than us and root can add entries to, or
// returns "". A directory owned by another user counts too. A sticky directory such as /tmp is only a problem when the
// next component is missing or belongs to someone else, since the sticky
// bit stops others from replacing entries they do not own. Directories that
// do not exist end the walk: their existing parent was already checked.
func writableProblem(dir string) string {
	var comps []string
	if t := strings.Trim(path.Clean(dir), "/"); t != "" {
		comps = strings.Split(t, "/")
	}
	cur := "/"
	for i := 0; ; i++ {
		fi, err := os.Stat(cur)
		if err != nil || !fi.IsDir() {
			return ""
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && !ownedByUsOrRoot(fi) {
			return fmt.Sprintf("%s is owned by uid %d", cur, st.Uid)
		}
		if what := writableBy(fi); what != "" {
			trusted := false
			if fi.Mode()&os.ModeSticky != 0 && i < len(comps) {
				if cfi, err := os.Lstat(path.Join(cur, comps[i])); err == nil {
					trusted = ownedByUsOrRoot(cfi)
				}
			}
			if !trusted {
				return fmt.Sprintf("%s is %s", cur, what)
			}
		}
		if i == len(comps) {
			return ""
		}
		cur = path.Join(cur, comps[i])
	}
}

// writableBy says who besides the owner may write to a directory: "world-
// writable", "group-writable (gid N)", or "" (group root counts as root).
func writableBy(fi os.FileInfo) string {
	m := fi.Mode().Perm()
	if m&0o002 != 0 {
		return "world-writable"
	}
	if m&0o020 != 0 {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Gid != 0 {
			return fmt.Sprintf("group-writable (gid %d)", st.Gid)
		}
	}
	return ""
}

func ownedByUsOrRoot(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && (st.Uid == 0 || int(st.Uid) == os.Getuid())
}
