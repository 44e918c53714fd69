package runner

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/exechost/exechost/internal/hint"
)

// FileID names one file: the device and inode an execution host recorded
// when it decided, so that the file that starts is the file it decided on,
// whatever is at the path by then.
type FileID struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// ErrExecutableChanged is a start refused because the file at the
// executable's path is no longer the one decided on.
var ErrExecutableChanged = errors.New("executable changed since the decision")

// pinned is an executable opened for starting by descriptor.
type pinned struct {
	file *os.File
	// path is what execve is given: the descriptor's path in the child
	// (ChildFD), so the open file starts, not whatever the name now
	// points to. A #! script's interpreter opens the same path, which is
	// why the descriptor is the child's own (not close-on-exec).
	path string
}

// FileIDsSupported says this platform has file ids (device and inode):
// everywhere but Windows, where an executable starts by its path.
const FileIDsSupported = runtime.GOOS != "windows"

// ChildFD is the descriptor the pinned executable has in the child.
const ChildFD = 3

// Pin opens path and checks that it is the file id names. The returned
// file starts as the child's descriptor ChildFD through execPath. The
// caller closes the file once the child has started.
func Pin(path string, id FileID) (f *os.File, execPath string, err error) {
	f, err = openExecutable(path)
	if err != nil {
		return nil, "", fmt.Errorf("%w: open %s: %w", ErrStart, path, err)
	}
	got, err := fileIDOf(f)
	if err != nil {
		f.Close()
		return nil, "", fmt.Errorf("%w: stat %s: %w", ErrStart, path, err)
	}
	if got != id {
		f.Close()
		return nil, "", hint.Wrap(fmt.Errorf("%w: %s: %w", ErrStart, path, ErrExecutableChanged), "run the command again; if the file was replaced on purpose, the next decision uses the new one")
	}
	return f, pinnedExecPath, nil
}

// IDOf returns the FileID of the file at path, following symlinks as
// execve does: one stat(2), cheap enough for every decision.
func IDOf(path string) (FileID, error) { return statID(path) }

// IDsOf records the file each path is now, as an execution host does when
// it decides: a path that cannot be stat'ed gets no id (the interpreter
// then refuses to start it). Nil where FileIDsSupported is false.
func IDsOf(paths []string) map[string]FileID {
	if !FileIDsSupported {
		return nil
	}
	out := make(map[string]FileID, len(paths))
	for _, p := range paths {
		if id, err := statID(p); err == nil {
			out[p] = id
		}
	}
	return out
}
