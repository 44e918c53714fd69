//go:build unix && !linux

package receipt

import "os"

func fdatasync(f *os.File) error { return f.Sync() }
