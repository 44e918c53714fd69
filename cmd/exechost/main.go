// Command exechost lets AI agents run shell commands safely: it routes each
// exec to a sandbox, the gateway host or a paired node, and every execution
// host enforces its own approvals policy before anything runs.
package main

import (
	"os"

	"github.com/exechost/exechost/internal/cli"
	"github.com/exechost/exechost/internal/reexec"
)

func main() {
	if reexec.Init() {
		return
	}
	os.Exit(cli.Main(os.Args[1:]))
}
