package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/bridge"
)

// TestSameErrorOnEveryHost sends the same faulty exec through each
// execution host — the gateway itself, a node runner, and a node that
// forwards to the approver exec host over its socket — and checks that
// each comes back with the same wire code and the same message: the hosts
// share one error mapping (bridge.AsError) and validate the request in
// one place (host.Engine.Prepare).
func TestSameErrorOnEveryHost(t *testing.T) {
	c := newCluster(t, gatewayConfig)
	// Each host allowlists echo and true only.
	writeFile(t, filepath.Join(c.gwDir, "exec-approvals.json"), policyAllowlist)
	local := c.addNode("local", "Local", policyAllowlist)
	app := c.pairNode("app", "App", policyAllowlist, "--exec-host", "app", "--exec-fallback", "deny")
	ap := start(t, app.dir, "approver", "--exec-host", "--auto-decide", "deny")
	waitFor(t, "the exec-host approver", func() bool { return strings.Contains(ap.Out.String(), "exec host: forwarded system.run") })

	hosts := []struct {
		name string
		p    bridge.ExecParams
	}{
		{"gateway", bridge.ExecParams{Host: "gateway"}},
		{"node", bridge.ExecParams{Host: "node", Node: local.id}},
		{"approver", bridge.ExecParams{Host: "node", Node: app.id}},
	}
	tests := []struct {
		name     string
		req      func(*bridge.ExecParams)
		code     string
		prefix   string
		nodeOnly bool // the request names a node, so host=gateway does not apply
	}{
		{name: "relative cwd", req: func(p *bridge.ExecParams) { p.Command, p.Cwd = "/bin/true", "rel/dir" },
			code: bridge.CodeInvalidRequest, prefix: `cwd "rel/dir" is not absolute`},
		{name: "refused env", req: func(p *bridge.ExecParams) { p.Command, p.Env = "/bin/true", map[string]string{"LD_PRELOAD": "x"} },
			code: bridge.CodeInvalidRequest, prefix: "dangerous environment variable"},
		{name: "allowlist miss", req: func(p *bridge.ExecParams) { p.Command = "/usr/bin/id" },
			code: bridge.CodeDenied, prefix: "SYSTEM_RUN_DENIED: allowlist miss"},
		{name: "security=deny", req: func(p *bridge.ExecParams) { p.Command, p.Security = "/bin/true", "deny" },
			code: bridge.CodeDenied, prefix: "SYSTEM_RUN_DISABLED: security=deny"},
		{name: "unknown node", req: func(p *bridge.ExecParams) { p.Command, p.Node = "/bin/true", "no-such-node" },
			code: bridge.CodeNotFound, prefix: "", nodeOnly: true},
	}
	agent := c.agentConn()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first := ""
			for _, h := range hosts {
				if tt.nodeOnly && h.p.Host != "node" {
					continue
				}
				p := h.p
				p.SessionKey = "codes-" + h.name
				tt.req(&p)
				ctx, cancel := context.WithTimeout(context.Background(), waitLong)
				var res bridge.ExecResult
				err := agent.Call(ctx, bridge.MethodExec, p, &res)
				cancel()
				if err == nil {
					t.Fatalf("host %s: ran (%+v), want %s", h.name, res, tt.code)
				}
				e := bridge.AsError(err)
				if e.Code != tt.code || !strings.HasPrefix(e.Message, tt.prefix) {
					t.Errorf("host %s: %s %q, want %s starting %q", h.name, e.Code, e.Message, tt.code, tt.prefix)
				}
				if first == "" {
					first = e.Message
				} else if e.Message != first {
					t.Errorf("host %s: message %q differs from the first host's %q", h.name, e.Message, first)
				}
			}
		})
	}
}
