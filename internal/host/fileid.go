package host

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"maps"
	"os"
	"slices"
	"sync"

	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/shellcmd"
)

// maxDigests bounds the executables whose digest an engine remembers.
const maxDigests = 1024

// digests remembers the sha256 of executables by file and version, so a
// prompt or an audit record names the bytes that run without hashing a
// large binary on every decision. It belongs to one engine.
type digests struct {
	mu   sync.Mutex
	byID map[digestKey]string
}

// digestKey is a file and the version of its contents: a rewrite in place
// changes the size or a time stamp (ctime always, which nobody can set).
type digestKey struct {
	id                 runner.FileID
	size, mtime, ctime int64
}

// sha256Of returns the hex sha256 of the file at path, or "" when it
// cannot be read (an execute-only file): the prompt then says nothing
// rather than something wrong.
func (d *digests) sha256Of(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	key, ok := digestKeyOf(f)
	if ok {
		d.mu.Lock()
		sum, hit := d.byID[key]
		d.mu.Unlock()
		if hit {
			return sum
		}
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if ok {
		d.mu.Lock()
		if d.byID == nil || len(d.byID) >= maxDigests {
			d.byID = map[digestKey]string{}
		}
		d.byID[key] = sum
		d.mu.Unlock()
	}
	return sum
}

// sha256s returns the digest of each executable p may start, for prompts
// and audit records; nil when none could be read.
func (e *Engine) sha256s(p *Prepared) map[string]string {
	var out map[string]string
	for path := range p.files {
		if sum := e.digests.sha256Of(path); sum != "" {
			if out == nil {
				out = make(map[string]string, len(p.files))
			}
			out[path] = sum
		}
	}
	return out
}

// changedSinceRecorded lists the executables whose matching allowlist
// entry holds a sha256 (recorded by allow-always) that the file at the
// path no longer has. recorded is the agent's index of those digests by
// pattern (recordedDigests): only a matched pattern with a recorded
// digest costs a look at the file.
func (e *Engine) changedSinceRecorded(p *Prepared, recorded map[string][]string) []string {
	var out []string
	segs := p.Analysis.Segments
	for i, pat := range p.Matched {
		if pat == "" || i >= len(segs) || segs[i].ResolvedPath == "" {
			continue
		}
		for _, want := range recorded[pat] {
			if sum := e.digests.sha256Of(segs[i].ResolvedPath); sum != want && !slices.Contains(out, segs[i].ResolvedPath) {
				out = append(out, segs[i].ResolvedPath)
			}
		}
	}
	return out
}

// fileIDs records, at decision time, the file each executable the run may
// start is: the runner and the interpreter start only that file. The
// analysis names it (Segment.File: the stat that resolved the path, or on
// a memo hit one its watch or re-read facts vouch for as unchanged), so
// most decisions need no system call here; any other path is stat'ed
// now. A path that cannot be stat'ed gets no id, and the interpreter
// refuses to start it.
func (e *Engine) fileIDs(p *Prepared) map[string]runner.FileID {
	if !runner.FileIDsSupported {
		return nil
	}
	paths := e.planExecutables(p)
	out := make(map[string]runner.FileID, len(paths))
	var rest []string
	for _, path := range paths {
		if id, ok := analysedFile(p.Analysis, path); ok {
			out[path] = id
		} else {
			rest = append(rest, path)
		}
	}
	if len(rest) > 0 {
		maps.Copy(out, runner.IDsOf(rest))
	}
	return out
}

// analysedFile returns the file the analysis found at path, if it names
// one.
func analysedFile(a shellcmd.Analysis, path string) (runner.FileID, bool) {
	for _, s := range a.Segments {
		if s.ResolvedPath == path && !s.File.IsZero() {
			return runner.FileID{Dev: s.File.Dev, Ino: s.File.Ino}, true
		}
	}
	return runner.FileID{}, false
}
