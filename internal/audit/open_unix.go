//go:build unix

package audit

import (
	"os"
	"syscall"
)

// openFlags refuse a symlink planted at the log's path: appending through
// it would let another user point our writes elsewhere.
const openFlags = syscall.O_NOFOLLOW | syscall.O_CLOEXEC

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
