//go:build !unix

package receipt

import "os"

// Without flock one process owns the log; the mutex serialises its appends.
func lock(*os.File) error { return nil }

func unlock(*os.File) {}

func datasync(f *os.File) error { return f.Sync() }
