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
	e, err := host.New(host.Options{
		StateDir: dir, Host: policy.HostGateway, NodeID: "local", Audit: g.auditRecorder(dir), CloseAudit: true,
		Prompter: asksock.LocalPrompter(dir),
		Warn:     func(err error) { fmt.Fprintf(g.stderr, "exechost: WARNING: %v\n", err) },
	})
	if err != nil || e.OnAudit == nil {
		return e, err
	}
	// The engine decides as the gateway host would (its policy is this
	// machine's file), but no gateway was involved: the audit log says
	// host "local", as `run --json` does, not "gateway/local".
	record := e.OnAudit
	e.OnAudit = func(r host.AuditRecord) {
		r.Host, r.NodeID = hostLocal, ""
		record(r)
	}
	return e, nil
}

// hostLocal is how `exechost run` names its execution host: this machine,
// without a gateway.
const hostLocal = "local"
