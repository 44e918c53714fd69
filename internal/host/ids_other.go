//go:build !unix

package host

import "io/fs"

func sysID(fs.FileInfo) any { return nil }

// ownerOf: no uid where there is no Stat_t.
func ownerOf(fs.FileInfo) (int, bool) { return 0, false }
