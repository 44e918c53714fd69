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
