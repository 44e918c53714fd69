//go:build kubernetes

package pick

// The Kubernetes driver brings client-go, which makes the binary about
// 50 MB larger, every exechost process about 24 MB larger in memory at
// start, and doubles the package initialisation that every interpreter
// run, confining launcher and CLI call pays. So it is linked only into a
// binary built with `-tags kubernetes` (docs/sandbox.md); the default
// build leaves it out.
import _ "github.com/exechost/exechost/internal/sandbox/kubernetes"
