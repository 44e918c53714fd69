//go:build unix

package runner

import (
	"os"

	"golang.org/x/sys/unix"
)

// openExecutable opens an executable without reading it: O_PATH on Linux
// works for a file the user may execute but not read.
func openExecutable(path string) (*os.File, error) {
	fd, err := unix.Open(path, openFlags, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

func fileIDOf(f *os.File) (FileID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return FileID{}, err
	}
	return FileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino)}, nil //nolint:unconvert // Dev is 32 bits on some platforms
}

func statID(path string) (FileID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return FileID{}, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return FileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino)}, nil //nolint:unconvert // Dev is 32 bits on some platforms
}
