package cli

import (
	"context"

	"github.com/exechost/exechost/internal/approverui/web"
	"github.com/exechost/exechost/internal/prompt"
)

// init plugs the web UI into `exechost approver --web ADDR` (see startWeb).
// No logger: with --tui the terminal belongs to the TUI, and every decision
// already reaches the execution host's audit log.
func init() {
	startWeb = func(ctx context.Context, addr string, b *prompt.Broker, stateDir string) (string, error) {
		return web.Start(ctx, web.Options{Addr: addr, Broker: b, StateDir: stateDir})
	}
}
