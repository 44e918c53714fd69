//go:build !unix

package shellrun

import (
	"context"
	"errors"
	"io"
)

// Supported says the interpreter can run here: not on this platform, where
// the execution host runs only commands it can start directly.
const Supported = false

// Run is not available on this platform.
func Run(context.Context, Plan, io.Reader, io.Writer, io.Writer) (int, error) {
	return DeniedExit, errors.New("the command interpreter is not available on this platform")
}
