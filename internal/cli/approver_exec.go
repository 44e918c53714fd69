package cli

import (
	"os"
	"strings"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/approver"
	"github.com/exechost/exechost/internal/approver/apphost"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/node"
)

// approverExecutor is the executor of `exechost approver --exec-host`:
// forwarded commands go through host engines over dir's
// exec-approvals.json, prompt in b (this approver's own queue) and are
// audited like any other run.
func (g *globals) approverExecutor(dir string, b *approver.Broker) *apphost.Executor {
	var onAudit func(host.AuditRecord)
	if rec := g.auditRecorder(dir); rec != nil {
		onAudit = host.AuditTo(rec.Log(), rec.Warn)
	}
	return apphost.New(dir, b, func(e *host.Engine) { e.OnAudit = onAudit })
}

// sessionSummary names the session variables forwarded commands will see,
// so the user can tell at start-up whether this is the desktop session.
func sessionSummary() string {
	var parts []string
	for _, name := range approver.SessionEnv {
		if v, ok := os.LookupEnv(name); ok && v != "" {
			parts = append(parts, name+"="+v)
		}
	}
	if len(parts) == 0 {
		return "no DISPLAY, WAYLAND_DISPLAY or session bus: desktop commands will fail"
	}
	return strings.Join(parts, " ")
}

// nodeExecutor returns what a node runner runs system.run with: eng
// itself when execHost is local, else a node.Forwarder to this state
// directory's approver (`exechost approver --exec-host`) that falls back
// to eng or denies as fallback says. The caller wires the forwarder's
// NodeID, OnEvent and Logger once the runner exists.
func nodeExecutor(dir string, eng *host.Engine, execHost, fallback string) (node.Executor, *node.Forwarder, error) {
	mode, err := node.ParseExecHost(execHost)
	if err != nil {
		return nil, nil, usagef("--exec-host: %v", err)
	}
	fb, err := node.ParseExecFallback(fallback)
	if err != nil {
		return nil, nil, usagef("--exec-fallback: %v", err)
	}
	if mode == node.ExecHostLocal {
		return eng, nil, nil
	}
	st := approvals.NewStore(dir)
	f, err := st.Load()
	if err != nil {
		return nil, nil, err
	}
	fw := &node.Forwarder{
		Client:   &approver.ExecClient{SocketPath: st.SocketPath(f), Token: []byte(f.Socket.Token)},
		Local:    eng,
		Fallback: fb,
	}
	return fw, fw, nil
}
