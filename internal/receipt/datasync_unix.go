//go:build unix

package receipt

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync flushes f's data and the size needed to read it back.
func datasync(f *os.File) error {
	for {
		err := fdatasync(f)
		if err != unix.EINTR {
			return err
		}
	}
}
