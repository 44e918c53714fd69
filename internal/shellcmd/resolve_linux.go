package shellcmd

import (
	"os"
	"syscall"
)

// dirID is what must stay equal for a cached directory listing to hold.
type dirID struct {
	dev, ino     uint64
	mtime, ctime int64 // nanoseconds since the epoch
}

// fileIDOf returns the file fi is (device and inode), or false when fi
// carries no stat data.
func fileIDOf(fi os.FileInfo) (FileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return FileID{}, false
	}
	return FileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino)}, true //nolint:unconvert // as runner's statID
}

// identity returns fi's dirID, or false when fi carries no stat data.
func identity(fi os.FileInfo) (dirID, bool) {
	if fi == nil {
		return dirID{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return dirID{}, false
	}
	return dirID{
		dev: uint64(st.Dev), ino: uint64(st.Ino),
		mtime: int64(st.Mtim.Sec)*1e9 + int64(st.Mtim.Nsec),
		ctime: int64(st.Ctim.Sec)*1e9 + int64(st.Ctim.Nsec),
	}, true
}
