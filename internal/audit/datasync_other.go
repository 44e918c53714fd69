//go:build !linux

package audit

import "os"

// datasync is a full sync where fdatasync is not offered (on macOS, Go's
// File.Sync is F_FULLFSYNC, the only call that reaches the platters).
func datasync(f *os.File) error { return f.Sync() }
