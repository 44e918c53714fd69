package cli

import (
	"fmt"

	"github.com/exechost/exechost/internal/asksock"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
)

// localEngine builds the execution-host engine for commands that run on
// this machine without a gateway (`exechost run`): this state directory's
// approvals, the local approver socket for prompts, and the audit log.
// A malformed approvals file is an error here, before anything can run.
// The daemons build theirs in gateway.Run and node.Run, with host.New too.
func (g *globals) localEngine(dir string) (*host.Engine, error) {
	return host.New(host.Options{
		StateDir: dir, Host: policy.HostGateway, NodeID: "local", Audit: g.auditRecorder(dir), CloseAudit: true,
		Prompter: asksock.LocalPrompter(dir),
		Warn:     func(err error) { fmt.Fprintf(g.stderr, "exechost: WARNING: %v\n", err) },
	})
}
