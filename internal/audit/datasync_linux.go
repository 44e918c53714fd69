package audit

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync flushes f's data and only the metadata needed to read it back:
// the new size, but no block allocation inside the reserved blocks
// (reserveBlocks).
func datasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

// reserveBlocks allocates disk blocks for [off, off+n) of f without
// changing its size (FALLOC_FL_KEEP_SIZE): the file still ends at its last
// line, and appends into the range need not allocate.
func reserveBlocks(f *os.File, off, n int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, off, n)
		if err != unix.EINTR {
			return err
		}
	}
}
