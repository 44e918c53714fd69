//go:build unix

package host

import (
	"io/fs"
	"syscall"
)

func sysID(fi fs.FileInfo) any {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return nil
}

// ownerOf is the uid owning fi.
func ownerOf(fi fs.FileInfo) (int, bool) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), true
	}
	return 0, false
}
