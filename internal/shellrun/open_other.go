//go:build unix && !linux

package shellrun

import (
	"fmt"
	"os"
)

// openContained refuses every file but /dev/null where the real path of
// an opened directory cannot be read back (no /proc): the contained rules
// fail closed here.
func openContained(_ *Walls, path string, _ int, _ os.FileMode) (*os.File, error) {
	return nil, &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: only /dev/null may be opened on this platform", ErrDenied)}
}
