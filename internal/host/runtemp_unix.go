//go:build unix

package host

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// processExists says whether pid names a process (ours or not); only a
// definite "no such process" is false, so a sweep never removes the
// directory of a process it merely cannot see.
func processExists(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// ownedByUs says whether path's owner is this process's user.
func ownedByUs(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}

// unused reports whether dir is still a run directory as made: an empty
// directory of mode 0700 owned by this user. It is opened without
// following a link and checked through that one descriptor, so a link
// put in its place is refused rather than followed.
func unused(dir string) bool {
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		return false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
		return false
	}
	_, err = f.Readdirnames(1)
	return err == io.EOF
}
