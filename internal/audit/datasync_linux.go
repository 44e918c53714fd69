package audit

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync flushes f's data and only the metadata needed to read it back.
// Inside the preallocated region that is no metadata at all, which is what
// makes a group commit cheap.
func datasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}
