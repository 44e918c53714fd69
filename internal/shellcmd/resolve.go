package shellcmd

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// defaultPaths are the search paths programs fall back to when they do not
// use the caller's PATH (env -i, sudo with secure_path, pkexec, run0): glibc
// and musl execvp defaults, macOS, and Debian's sudo secure_path.
var defaultPaths = []string{
	"/bin:/usr/bin",
	"/usr/local/bin:/bin:/usr/bin",
	"/usr/bin:/bin:/usr/sbin:/sbin",
	"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
}

// systemDirs hold executables installed by the operating system; a shell or
// wrapper found there is the real one, whatever PATH says.
var systemDirs = map[string]bool{"/bin": true, "/usr/bin": true, "/sbin": true, "/usr/sbin": true}

// resolveSegment resolves a command name to a segment. A name that does not
// resolve gives a segment with an empty ResolvedPath (a miss); situations
// where the shell might run something other than what resolution finds fail
// the analysis.
func (a *analyzer) resolveSegment(name arg, st *cwdState, ctx cmdCtx) (Segment, error) {
	seg := Segment{Name: name.text, Role: RoleCommand, Via: ctx.via}
	p, err := a.resolve(name.val, *st, ctx)
	if err != nil {
		return seg, err
	}
	if p != "" {
		seg.ResolvedPath = p
		seg.RealPath = a.realPath(p)
		// The stat that found p executable names the file (a.isExecutable,
		// remembered for this analysis): no further system call.
		if fi, err := a.followed(p); err == nil {
			seg.File, _ = fileIDOf(fi)
		}
	}
	return seg, nil
}

func (a *analyzer) resolve(name string, st cwdState, ctx cmdCtx) (string, error) {
	if strings.Contains(name, "/") {
		return a.resolveQualified(name, st)
	}
	p, err := a.lookPath(name, a.env.PATH, st)
	if err != nil || p == "" || !ctx.defaultPath {
		return p, err
	}
	real := a.realPath(p)
	for _, dp := range defaultPaths {
		q, _ := a.lookPath(name, dp, cwdState{dir: "/"})
		if q != "" && a.realPath(q) != real {
			return "", failf("%s may run %s rather than %s: %s does not use the host PATH", name, q, p, lastVia(ctx)).hint("write the absolute path")
		}
	}
	return p, nil
}

// resolveQualified resolves a name containing a slash, as execve would.
func (a *analyzer) resolveQualified(name string, st cwdState) (string, error) {
	full := name
	if !strings.HasPrefix(name, "/") {
		if st.uncertain {
			return "", failf("relative command path %s after a cd whose effect is uncertain", name).hint("join commands with && after cd, or use an absolute path")
		}
		if st.dir == "" {
			return "", nil
		}
		full = st.dir + "/" + name
	}
	clean := path.Clean(full)
	if hasDotDot(name) {
		// The kernel resolves ".." after following symlinks; a cleaned path
		// does it before. They must name the same file.
		r1, e1 := a.evalSymlinks(full)
		r2, e2 := a.evalSymlinks(clean)
		if (e1 == nil) != (e2 == nil) || r1 != r2 {
			return "", failf("command path %s uses \"..\" through a symlink", name).hint("write the path without \"..\"")
		}
	}
	if !a.isExecutable(clean) {
		return "", nil
	}
	return clean, nil
}

func hasDotDot(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}

// lookPath finds a bare name on a search path as /bin/sh does. Empty and
// relative entries are never used for resolution; if one of them comes
// before the match and holds the name, the shell would run that file
// instead, so the analysis fails.
func (a *analyzer) lookPath(name, pathList string, st cwdState) (string, error) {
	for dir := range strings.SplitSeq(pathList, ":") {
		if !strings.HasPrefix(dir, "/") {
			if st.uncertain || st.dir == "" {
				return "", failf("the host PATH has the relative entry %q and the working directory is not known", dir).hint("remove relative entries from the host PATH")
			}
			if c := path.Join(st.dir, dir, name); a.isExecutable(c) {
				return "", failf("the shell would run %s from the relative PATH entry %q", c, dir).hint("remove relative entries from the host PATH")
			}
			continue
		}
		// The directory's own stat serves only the cache of absent names:
		// it is taken when that cache lists the name (one stat then
		// stands for every such name in the directory), and to note a
		// name found missing. A name that is there costs its own lstat
		// alone.
		if a.z.absent.lists(dir, name) {
			dfi, err := a.statFollow(dir)
			if err != nil || a.z.absent.has(dir, dfi, name) {
				continue // gone, or still missing from a directory unchanged since
			}
		}
		c := path.Join(dir, name)
		if a.isExecutable(c) {
			return c, nil
		}
		if _, err := a.lstat(c); errors.Is(err, fs.ErrNotExist) {
			a.noteAbsent(dir, name, c)
		}
	}
	return "", nil
}

// noteAbsent records in the cache of absent names that c (name in dir) is
// missing, if a look at the directory followed by a look at c again says
// so: the directory's stat must be taken before the lookup that finds the
// name missing, or a file created in between could be listed as absent
// under the directory's new identity.
func (a *analyzer) noteAbsent(dir, name, c string) {
	if a.z.absent == nil {
		return
	}
	dfi, err := a.statFollow(dir)
	if err != nil {
		return
	}
	if _, err := a.osLstat(c); errors.Is(err, fs.ErrNotExist) {
		a.z.absent.note(a.z.now(), dir, dfi, name)
	}
}

// statFollow is os.Stat (following symlinks: a search directory's own
// identity, an executable's own file), remembered for one analysis.
func (a *analyzer) statFollow(p string) (os.FileInfo, error) {
	r := a.remembered(factKey{opStat, p})
	return r.fi, r.err
}

// Bounds of the cross-analysis cache of names known to be absent from
// search directories.
const (
	// racyWindow: a directory's listing is cached only when its ctime is
	// at least this old. Creating, removing or renaming an entry (and
	// chmod, utimes, anything else) sets the directory's ctime to the
	// current time, which userspace cannot set back; but timestamps come
	// from a coarse clock, so a change within the same tick as the cached
	// state would leave ctime equal. Requiring the cached ctime to be old
	// means any later change yields a different ctime. Two seconds cover
	// every file system's timestamp granularity Linux supports (FAT's
	// 2 s included).
	racyWindow = 2 * time.Second
	// maxAbsentDirs and maxAbsentNames bound the cache's memory; past
	// them it starts over.
	maxAbsentDirs  = 256
	maxAbsentNames = 1024
)

// absent caches, per search directory, the names a lookup found missing,
// valid while the directory's identity (device, inode) and ctime/mtime
// are unchanged. Only negative results are cached: a name that exists is
// always stat'ed again (its own identity, mode and symlink target can change
// without touching the directory), so replacing, chmod-ing or re-linking a
// file is always seen, and adding one changes the directory's ctime.
// Renaming or re-linking the directory itself, or any ancestor, changes
// what os.Stat of the path reaches (another inode) or its ctime.
//
// It is Analyzer.absent; its methods treat a nil cache as empty.
type absentCache struct {
	mu   sync.Mutex
	dirs map[string]*absentDir
}

type absentDir struct {
	id    dirID
	names map[string]struct{}
}

// lists reports whether name is listed as missing from dir under any of
// its identities: only then is the directory's stat worth taking.
func (c *absentCache) lists(dir, name string) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dirs[dir]
	if d == nil {
		return false
	}
	_, ok := d.names[name]
	return ok
}

// has reports whether name is known to be missing from dir, whose stat
// (taken in this analysis, before any lookup in it) is fi.
func (c *absentCache) has(dir string, fi os.FileInfo, name string) bool {
	if c == nil {
		return false
	}
	id, ok := identity(fi)
	if !ok {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dirs[dir]
	if d == nil || d.id != id {
		return false
	}
	_, ok = d.names[name]
	return ok
}

// note records that name was missing from dir, if dir's state is old
// enough to be told apart from any later change (racyWindow). fi must have
// been taken before the lookup that found name missing.
func (c *absentCache) note(now time.Time, dir string, fi os.FileInfo, name string) {
	id, ok := identity(fi)
	if !ok || now.Sub(time.Unix(0, id.ctime)) < racyWindow {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dirs[dir]
	if d == nil || d.id != id {
		if len(c.dirs) >= maxAbsentDirs {
			clear(c.dirs)
		}
		d = &absentDir{id: id, names: map[string]struct{}{}}
		c.dirs[dir] = d
	}
	if len(d.names) >= maxAbsentNames {
		clear(d.names)
	}
	d.names[name] = struct{}{}
}

// isExecutable reports whether p (following symlinks) is a regular file
// with an execute bit.
func (a *analyzer) isExecutable(p string) bool {
	fi, err := a.followed(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// followed is p's stat following symlinks, as execve finds the file: its
// lstat, and for a symlink its stat, each remembered for one analysis.
func (a *analyzer) followed(p string) (os.FileInfo, error) {
	fi, err := a.lstat(p)
	if err == nil && fi.Mode()&os.ModeSymlink != 0 {
		fi, err = a.statFollow(p)
	}
	return fi, err
}

// lstat is os.Lstat, remembered for the duration of one analysis: a
// command looks up the same few directories again and again.
func (a *analyzer) lstat(p string) (os.FileInfo, error) {
	r := a.remembered(factKey{opLstat, p})
	return r.fi, r.err
}

// realPath resolves every symlink in p ("" when p does not exist). A file
// that is not itself a symlink only needs its directory resolved, which is
// remembered for the analysis.
func (a *analyzer) realPath(p string) string {
	fi, err := a.lstat(p)
	if err != nil {
		return ""
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		r, err := a.evalSymlinks(p)
		if err != nil {
			return ""
		}
		return r
	}
	dir := path.Dir(p)
	rd := a.remembered(factKey{opEvalSymlinks, dir}).real
	if rd == "" {
		return ""
	}
	if rd == dir && path.Clean(p) == p {
		return p // what the join below gives, without a new string
	}
	return filepath.Join(rd, path.Base(p))
}

// trustedPath reports whether a resolved tool is the one the host PATH
// finds under the name tool, or lives in a system directory.
func (a *analyzer) trustedPath(seg Segment, tool string, st *cwdState) bool {
	if systemDirs[path.Dir(seg.ResolvedPath)] {
		return true
	}
	p, err := a.lookPath(tool, a.env.PATH, *st)
	return err == nil && p != "" && seg.RealPath != "" && a.realPath(p) == seg.RealPath
}
