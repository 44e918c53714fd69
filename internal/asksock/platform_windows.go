package asksock

import "github.com/exechost/exechost/internal/hint"
import "fmt"

// platformSupported fails closed on Windows: Go's AF_UNIX sockets there
// offer no peer-credential call, and the design requires the approver to
// accept only its own user. Until an owner check (named pipe with a DACL,
// or GetNamedPipeClientProcessId) lands, the approver does not start and
// execution hosts apply askFallback.
func platformSupported() error {
	return hint.Wrap(fmt.Errorf("%w: windows has no peer-credential check for unix sockets yet", ErrUnsupported), "askFallback applies; run the approver on Linux or macOS")
}
