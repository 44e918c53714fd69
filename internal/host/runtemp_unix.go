//go:build unix

package host

import (
	"errors"
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
