//go:build !nokubernetes

package pick

// The Kubernetes driver brings client-go, which makes the binary about
// 50 MB larger and every exechost process (nodes, and the resident agent
// in each sandbox) about 24 MB larger in memory at start; `-tags
// nokubernetes` builds exechost without it (docs/sandbox.md).
import _ "github.com/exechost/exechost/internal/sandbox/kubernetes"
