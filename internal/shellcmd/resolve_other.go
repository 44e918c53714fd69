//go:build !linux

package shellcmd

import "os"

// dirID is unused off Linux: the cache of absent names is off there, so
// every lookup stats the file system as before.
type dirID struct{ ctime int64 }

// fileIDOf reports false: the execution host stats each executable
// itself where the analysis does not name its file.
func fileIDOf(os.FileInfo) (FileID, bool) { return FileID{}, false }

// identity reports false: no directory listing is cached.
func identity(os.FileInfo) (dirID, bool) { return dirID{}, false }
