//go:build !linux

package agent

import (
	"fmt"
	"io"
	"runtime"
)

// Main refuses to serve off Linux: sandboxes (containers, bwrap) are Linux
// processes, so an agent is only ever started on Linux.
func Main(_ io.Reader, _ io.Writer, errOut io.Writer) int {
	fmt.Fprintf(errOut, "exechost sandbox agent: runs only inside a Linux sandbox, this is %s\n", runtime.GOOS)
	return 1
}
