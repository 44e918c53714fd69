package cli

import (
	"os"
	"strings"

	"github.com/exechost/exechost/internal/asksock"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/prompt"
)

// approverExecutor is the executor of `exechost approver --exec-host`:
// forwarded commands go through host engines over dir's
// exec-approvals.json, prompt in b (this approver's own queue) and are
// audited like any other run.
func (g *globals) approverExecutor(dir string, b *prompt.Broker) *asksock.EngineExecutor {
	onAudit := host.AuditRecorder(g.auditRecorder(dir))
	return asksock.NewEngineExecutor(dir, b, func(e *host.Engine) { e.OnAudit = onAudit })
}

// sessionSummary names the session variables forwarded commands will see,
// so the user can tell at start-up whether this is the desktop session.
func sessionSummary() string {
	var parts []string
	for _, name := range asksock.SessionEnv {
		if v, ok := os.LookupEnv(name); ok && v != "" {
			parts = append(parts, name+"="+v)
		}
	}
	if len(parts) == 0 {
		return "no DISPLAY, WAYLAND_DISPLAY or session bus: desktop commands will fail"
	}
	return strings.Join(parts, " ")
}
