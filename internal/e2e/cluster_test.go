package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/exechost/exechost/internal/bridge"
)

// TestRoutingSelectionEventsSessions runs one gateway with two nodes and
// walks through routing to each host, every selection rule and error,
// events per session, per-node policy outcomes, slash commands and a
// background run.
func TestRoutingSelectionEventsSessions(t *testing.T) {
	c := newCluster(t, gatewayConfig)
	build := c.addNode("n1", "Build Box", policyFull)
	laptop := c.addNode("n2", "Laptop", policyAllowlist)

	t.Run("host=gateway", func(t *testing.T) {
		res, r := c.execJSON("--host", "gateway", "--session", "gw", "echo from-gateway; exit 4")
		if r.code != 4 || res.Host != "gateway" || strings.TrimSpace(res.Stdout) != "from-gateway" || res.ExitCode != 4 {
			t.Fatalf("exec host=gateway: %+v\n%s", res, r)
		}
	})
	t.Run("host=node by exact id", func(t *testing.T) {
		res, r := c.execJSON("--host", "node", "--node", build.id, "echo from-node")
		if r.code != 0 || res.NodeID != build.id || strings.TrimSpace(res.Stdout) != "from-node" {
			t.Fatalf("exec host=node: %+v\n%s", res, r)
		}
	})
	t.Run("host=sandbox without a backend", func(t *testing.T) {
		_, r := c.execJSON("--host", "sandbox", "echo x")
		if r.code != 125 || !strings.Contains(r.stderr, "sandbox backend not configured") {
			t.Fatalf("exec host=sandbox: %s", r)
		}
	})

	selection := []struct {
		name, node, wantID, wantErr string
		alsoNames                   []string
	}{
		{name: "normalized display name", node: "BUILD  box!", wantID: build.id},
		{name: "display name", node: "laptop", wantID: laptop.id},
		{name: "id prefix", node: build.id[:6], wantID: build.id},
		{name: "id prefix too short", node: build.id[:5], wantErr: "no node matches"},
		{name: "remote ip shared by both", node: "127.0.0.1", wantErr: "ambiguous node", alsoNames: []string{build.id, laptop.id}},
		{name: "unknown", node: "nowhere", wantErr: "no node matches"},
		{name: "no node with two paired", node: "", wantErr: "node required", alsoNames: []string{build.id, laptop.id}},
	}
	for _, tt := range selection {
		t.Run("select "+tt.name, func(t *testing.T) {
			args := []string{"--host", "node"}
			if tt.node != "" {
				args = append(args, "--node", tt.node)
			}
			res, r := c.execJSON(append(args, "echo selected")...)
			if tt.wantErr != "" {
				if r.code != 1 || !strings.Contains(r.stderr, tt.wantErr) {
					t.Fatalf("want error %q, got %s", tt.wantErr, r)
				}
				for _, n := range tt.alsoNames {
					if !strings.Contains(r.stderr, n) {
						t.Errorf("error does not name candidate %s: %s", n, r.stderr)
					}
				}
				return
			}
			if r.code != 0 || res.NodeID != tt.wantID {
				t.Fatalf("want node %s, got %+v\n%s", tt.wantID, res, r)
			}
		})
	}

	t.Run("output cap applies on a node", func(t *testing.T) {
		res, r := c.execJSON("--host", "node", "--node", build.id, "head -c 300000 /dev/zero | tr '\\0' x")
		if r.code != 0 || !res.Truncated || !strings.HasSuffix(res.Stdout, "… (truncated)") || len(res.Stdout) > 200_100 {
			t.Fatalf("flood: truncated=%v len=%d tail=%q\n%s", res.Truncated, len(res.Stdout), tail(res.Stdout), r.stderr)
		}
	})

	t.Run("events go to the right session", func(t *testing.T) {
		res, r := c.execJSON("--host", "node", "--node", build.id, "--session", "alpha", "echo evt")
		if r.code != 0 {
			t.Fatalf("exec: %s", r)
		}
		// The run's own events came with its response; the next exec
		// in another session must not see them.
		evs := texts(res.Events)
		wantStart := fmt.Sprintf("Exec started (node=%s, id=%s)", "Build Box", res.RunID) // the node as --node takes it: its name
		wantFinish := fmt.Sprintf("Exec finished (node=%s, id=%s, code=0)", "Build Box", res.RunID)
		if !hasPrefix(evs, wantStart) || !hasPrefix(evs, wantFinish) {
			t.Fatalf("events of session alpha = %q, want %q and %q", evs, wantStart, wantFinish)
		}
		if evs := c.events("beta"); len(evs) != 0 {
			t.Errorf("session beta got %q", evs)
		}
		if evs := c.events("alpha"); len(evs) != 0 {
			t.Errorf("session alpha events were not drained: %q", evs)
		}
	})

	// Per-node policy: the node's own exec-approvals.json decides.
	policies := []struct {
		name, policy, command, wantErr string
		wantCode                       int
	}{
		{"allowlist hit", policyAllowlist, "/usr/bin/true", "", 0},
		{"allowlist miss", policyAllowlist, "/usr/bin/id -u", "SYSTEM_RUN_DENIED: allowlist miss", 126},
		{"deny", policyDeny, "/usr/bin/true", "SYSTEM_RUN_DISABLED: security=deny", 126},
		{"ask with fallback deny", policyAskDeny, "/usr/bin/true", "SYSTEM_RUN_DENIED: approval required", 126},
		{"ask with fallback full", policyAskFull, "/usr/bin/id -u", "", 0},
		{"ask with fallback allowlist hit", policyAskList, "/usr/bin/true", "", 0},
		{"ask with fallback allowlist miss", policyAskList, "/usr/bin/id -u", "SYSTEM_RUN_DENIED: allowlist miss", 126},
	}
	for _, tt := range policies {
		t.Run("node policy "+tt.name, func(t *testing.T) {
			writeFile(t, filepath.Join(laptop.dir, "exec-approvals.json"), tt.policy)
			session := "pol-" + strings.ReplaceAll(tt.name, " ", "-")
			_, r := c.execJSON("--host", "node", "--node", "laptop", "--session", session, tt.command)
			if r.code != tt.wantCode || (tt.wantErr != "" && !strings.Contains(r.stderr, tt.wantErr)) {
				t.Fatalf("want exit %d and %q, got %s", tt.wantCode, tt.wantErr, r)
			}
			if tt.wantErr != "" {
				evs := c.events(session)
				want := fmt.Sprintf("Exec denied (node=%s, id=", "Laptop")
				if !hasPrefix(evs, want) {
					t.Errorf("session %s events = %q, want one starting %q", session, evs, want)
				}
			}
		})
	}
	// A node whose policy asks every time, with a real approver process
	// answering on its socket. The node's file is left as the node wrote
	// it at start (with the socket token the approver must share).
	asker := c.addNode("asker", "Asker", policyAskDeny)
	for _, tt := range []struct{ decision, wantErr string }{
		{"allow-once", ""},
		{"deny", "SYSTEM_RUN_DENIED: user denied"},
	} {
		t.Run("node asks its approver: "+tt.decision, func(t *testing.T) {
			ap := start(t, asker.dir, "approver", "--auto-decide", tt.decision)
			waitFor(t, "the approver socket", func() bool { return strings.Contains(ap.Out.String(), "listening") })
			res, r := c.execJSON("--host", "node", "--node", asker.id, "/usr/bin/true")
			if tt.wantErr == "" && (r.code != 0 || res.NodeID != asker.id) {
				t.Fatalf("approved run: %s", r)
			}
			if tt.wantErr != "" && (r.code != 126 || !strings.Contains(r.stderr, tt.wantErr)) {
				t.Fatalf("denied run: want %q, got %s", tt.wantErr, r)
			}
			ap.kill(t)
		})
	}
	writeFile(t, filepath.Join(laptop.dir, "exec-approvals.json"), policyAllowlist)

	t.Run("/exec and /elevated round trip", func(t *testing.T) {
		sess := []string{"--session", "slash", "--agent", "ops"}
		step := func(text string) bridge.SessionCommandResult {
			t.Helper()
			r := c.cli(append([]string{"exec", "--json", "--session-command", text}, sess...)...)
			if r.code != 0 {
				t.Fatalf("%s: %s", text, r)
			}
			var res bridge.SessionCommandResult
			mustJSON(t, r.stdout, &res)
			return res
		}
		step("/exec host=node node=build-box")
		res, r := c.execJSON(append(sess, "echo via-override")...)
		if r.code != 0 || res.Host != "node" || res.NodeID != build.id {
			t.Fatalf("after /exec: %+v\n%s", res, r)
		}
		if got := step("/elevated on").Settings; got.Host != "gateway" || got.Security != "full" || got.Elevated != "on" {
			t.Fatalf("/elevated on settings = %+v", got)
		}
		res, r = c.execJSON(append(sess, "echo elevated")...)
		if r.code != 0 || res.Host != "gateway" {
			t.Fatalf("after /elevated on: %+v\n%s", res, r)
		}
		if got := step("/elevated off").Settings; got.Host != "node" || got.Node != "build-box" || got.Elevated != "" {
			t.Fatalf("/elevated off settings = %+v", got)
		}
		res, r = c.execJSON(append(sess, "echo restored")...)
		if r.code != 0 || res.NodeID != build.id {
			t.Fatalf("after /elevated off: %+v\n%s", res, r)
		}
		// Overrides are per agent and session.
		res, r = c.execJSON("--session", "slash", "--agent", "other", "--node", "laptop", "/usr/bin/true")
		if r.code != 125 || !strings.Contains(r.stderr, "sandbox backend not configured") {
			t.Fatalf("another agent used the override: %+v\n%s", res, r)
		}
		r = c.cli(append([]string{"exec", "--session-command", "/exec host=mars"}, sess...)...)
		if r.code != 1 || !strings.Contains(r.stderr, "accepted: sandbox, gateway, node") {
			t.Fatalf("/exec host=mars: %s", r)
		}
	})

	t.Run("background run", func(t *testing.T) {
		res, r := c.execJSON("--host", "gateway", "--session", "bg", "--yield-ms", "100", "sleep 1; echo late")
		if r.code != 0 || res.Status != bridge.ExecRunning || res.RunID == "" {
			t.Fatalf("yielded exec: %+v\n%s", res, r)
		}
		var st bridge.ExecStatusResult
		waitFor(t, "background run to finish", func() bool {
			r := c.cli("exec", "--json", "--status", res.RunID, "--session", "bg")
			if r.code != 0 {
				t.Fatalf("exec --status: %s", r)
			}
			mustJSON(t, r.stdout, &st)
			return st.Status != bridge.RunRunning
		})
		if st.Status != bridge.RunCompleted || st.Result == nil || strings.TrimSpace(st.Result.Stdout) != "late" {
			t.Fatalf("status = %+v", st)
		}
		want := fmt.Sprintf("Exec finished (node=gateway, id=%s, code=0)", res.RunID)
		if evs := c.events("bg"); !hasPrefix(evs, want) {
			t.Errorf("session bg events = %q, want %q", evs, want)
		}
		if r := c.cli("exec", "--status", "run-nope"); r.code != 1 || !strings.Contains(r.stderr, "unknown run") {
			t.Errorf("status of an unknown run: %s", r)
		}
	})

	t.Run("node killed mid-run fails the call", func(t *testing.T) {
		victim := c.addNode("n3", "Victim", policyFull)
		caller := start(t, c.gwDir, "exec", "--gateway", c.url, "--host", "node", "--node", victim.id, "--session", "kill", "sleep 120")
		waitFor(t, "the run to start on the node", func() bool {
			return hasPrefix(c.events("kill"), "Exec started (node=Victim")
		})
		victim.p.signal(syscall.SIGKILL)
		err := caller.wait(t, "exec whose node died")
		if err == nil || !strings.Contains(caller.Out.String(), "disconnected") {
			t.Fatalf("exec after node death: err=%v output=%s", err, caller.Out)
		}
	})
}

func tail(s string) string {
	if len(s) > 40 {
		return s[len(s)-40:]
	}
	return s
}

func texts(evs []bridge.SystemEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Text
	}
	return out
}
