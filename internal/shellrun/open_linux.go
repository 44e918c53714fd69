package shellrun

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// openContained opens path (absolute) for a redirection under the
// contained rules. A read opens as the interpreter would; the confinement
// (Landlock) keeps hidden and protected files out of reach. A write opens
// the directory first (following its symbolic links, as the kernel will),
// takes that directory's real path from the descriptor, and refuses
// unless the file's real path lies beneath c's writable roots and outside
// its read-only paths; the file is then opened
// relative to that descriptor without following a final symbolic link, so
// nothing can swap the directory or plant a link between the check and
// the open. Landlock refuses writes outside the roots anyway; this check
// also keeps the persistence paths inside them read-only, which Landlock
// alone does not.
func openContained(c *Walls, path string, flag int, perm os.FileMode) (*os.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) == 0 {
		return os.OpenFile(path, flag, perm)
	}
	dir, base := filepath.Split(path)
	if base == "" || base == "." || base == ".." {
		return nil, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: not a file name", ErrDenied)}
	}
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(dfd)
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(dfd))
	if err != nil || !filepath.IsAbs(real) {
		return nil, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: cannot tell where %s is", ErrDenied, dir)}
	}
	full := filepath.Join(real, base)
	switch {
	case !beneathAny(full, c.Writable):
		return nil, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: %s is outside the run's writable roots (refused at run time)", ErrDenied, full)}
	case beneathAny(full, c.ReadOnly):
		return nil, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: %s is read-only for this run (refused at run time)", ErrDenied, full)}
	}
	fd, err := unix.Openat(dfd, base, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err == unix.ELOOP {
		return nil, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: %s is a symbolic link, which a redirection does not follow (refused at run time)", ErrDenied, full)}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// beneathAny reports whether p (clean, absolute) is one of roots or lies
// beneath one.
func beneathAny(p string, roots []string) bool {
	for _, r := range roots {
		r = filepath.Clean(r)
		if p == r || r == "/" || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}
