//go:build unix

package host

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/exechost/exechost/internal/runner"
)

func digestKeyOf(f *os.File) (digestKey, bool) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return digestKey{}, false
	}
	return digestKey{
		id:   runner.FileID{Dev: uint64(st.Dev), Ino: uint64(st.Ino)}, //nolint:unconvert // Dev is 32 bits on some platforms
		size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(),
	}, true
}
