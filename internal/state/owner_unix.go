//go:build unix

package state

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// checkOwner refuses files and directories owned by another user: trusting
// them would let that user plant policy for us.
func checkOwner(fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Getuid(); int(st.Uid) != uid {
		return fmt.Errorf("owned by uid %d, not by us (uid %d); refusing to use it", st.Uid, uid)
	}
	return nil
}

// CheckOwner is checkOwner for other packages (the approvals store).
func CheckOwner(fi fs.FileInfo) error { return checkOwner(fi) }
