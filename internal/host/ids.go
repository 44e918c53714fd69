package host

import (
	"crypto/rand"
	"encoding/hex"
	"io/fs"
)

// newRunID returns a random run id for requests that came without one.
func newRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "run-" + hex.EncodeToString(b[:])
}

// fileID distinguishes a replaced file from an edited one in the cache key
// (an atomic rename gives a new inode).
func fileID(fi fs.FileInfo) any { return sysID(fi) }
