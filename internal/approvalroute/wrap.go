package approvalroute

import "github.com/exechost/exechost/internal/host"

// Wrap returns the host.Options.Route hook for route: it puts the
// engine's local prompter and remote (the gateway) together with
// Prompter, so a daemon states its route in one field.
func Wrap(route Route, remote host.Prompter) func(local host.Prompter) (host.Prompter, error) {
	return func(local host.Prompter) (host.Prompter, error) { return Prompter(route, local, remote) }
}
