//go:build !linux

package audit

import (
	"errors"
	"os"
)

// datasync is a full sync where fdatasync is not offered (on macOS, Go's
// File.Sync is F_FULLFSYNC, the only call that reaches the platters).
func datasync(f *os.File) error { return f.Sync() }

// reserveBlocks is not offered here: appends allocate their own blocks.
func reserveBlocks(*os.File, int64, int64) error {
	return errors.ErrUnsupported
}
