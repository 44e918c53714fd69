//go:build linux

package openclaw_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/openclaw"
	"github.com/exechost/exechost/internal/openclaw/octest"
	"github.com/exechost/exechost/internal/testdep"
	"github.com/exechost/exechost/internal/testproc"
)

// Deadlines of the waits below; a healthy run is far quicker. They are
// bounds against hanging, not timing assertions.
const (
	waitNode   = 3 * time.Minute
	callLimit  = 90 * time.Second
	reapLimit  = 20 * time.Second
	pollPeriod = 250 * time.Millisecond
)

// approvalsFile is the node's exec-approvals.json: allowlist mode, no
// prompts, only echo and sleep allowed.
const approvalsFile = `{
  "version": 1,
  "defaults": {"security": "allowlist", "ask": "off", "askFallback": "deny"},
  "agents": {"asker": {"ask": "on-miss", "askFallback": "deny"}, "*": {"allowlist": [
    {"pattern": "/bin/echo"}, {"pattern": "/usr/bin/echo"},
    {"pattern": "/bin/sleep"}, {"pattern": "/usr/bin/sleep"}
  ]}}
}
`

// nodeInfo is the part of an OpenClaw node.list entry the tests read.
type nodeInfo struct {
	NodeID           string   `json:"nodeId"`
	DisplayName      string   `json:"displayName"`
	ClientID         string   `json:"clientId"`
	Commands         []string `json:"commands"`
	Connected        bool     `json:"connected"`
	ApprovalState    string   `json:"approvalState"`
	PendingRequestID string   `json:"pendingRequestId"`
	// HostStats is the node's last node.host.stats as the gateway kept it.
	HostStats map[string]any `json:"hostStats"`
}

type harness struct {
	t     *testing.T
	gw    *octest.Gateway
	node  *testproc.Proc
	opID  *openclaw.Identity
	op    *bridge.Conn
	name  string
	devID string
}

// TestRealGateway runs exechost's node against a real OpenClaw gateway
// (protocol v4, token auth, loopback). One gateway serves every subtest:
// its cold start dominates the cost.
func TestRealGateway(t *testing.T) {
	// Bound to all interfaces so that one subtest can connect from a
	// non-loopback address, which OpenClaw pairs only with an operator's
	// approval; everything else uses loopback. Token auth throughout.
	tmp, bin, gw := startGateway(t, "lan")
	t.Logf("openclaw gateway listening after %s", gw.Started)

	nodeDir := filepath.Join(tmp, "node")
	if err := os.MkdirAll(nodeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(nodeDir, "exec-approvals.json"), []byte(approvalsFile), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, gw: gw, name: "exechost-e2e"}
	var err error
	h.node, err = testproc.Start([]string{bin, "--state-dir", nodeDir, "node", "run",
		"--openclaw", gw.URL, "--openclaw-token-file", tokenFile(t, gw.Token), "--display-name", h.name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.node.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("exechost node output:\n%s", h.node.Out.String())
			t.Logf("gateway output (tail):\n%s", lastBytes(gw.Output(), 6000))
		}
	})
	if h.opID, err = openclaw.LoadOrCreateIdentity(filepath.Join(tmp, "operator")); err != nil {
		t.Fatal(err)
	}
	h.connectOperator()
	n := h.waitNode(true)
	h.devID = n.NodeID

	t.Run("listed with its commands", func(t *testing.T) {
		n := h.waitNode(true)
		if n.ClientID != openclaw.ClientID || !n.Connected {
			t.Fatalf("node listed as %+v", n)
		}
		for _, c := range openclaw.Commands {
			if !slices.Contains(n.Commands, c) {
				t.Errorf("command %s not listed: %v", c, n.Commands)
			}
		}
	})

	t.Run("allowlisted command runs", func(t *testing.T) {
		res, err := h.run([]string{"echo", "hello from exechost"}, 20000)
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 0 || !res.Success || res.Stdout != "hello from exechost\n" {
			t.Fatalf("result %+v", res)
		}
		// The wrapper OpenClaw's exec tool sends on Linux.
		res, err = h.run([]string{"/bin/sh", "-lc", "echo wrapped"}, 20000)
		if err != nil || res.Stdout != "wrapped\n" {
			t.Fatalf("sh -lc: %+v %v", res, err)
		}
		res, err = h.run([]string{"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, 20000)
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 3 || res.Success || res.Stdout != "out\n" || res.Stderr != "err\n" {
			t.Fatalf("result %+v", res)
		}
	})

	t.Run("allowlist miss is SYSTEM_RUN_DENIED", func(t *testing.T) {
		_, err := h.run([]string{"/usr/bin/id", "-u"}, 20000)
		if err == nil || !strings.Contains(err.Error(), "SYSTEM_RUN_DENIED") || !strings.Contains(err.Error(), "allowlist miss") {
			t.Fatalf("want SYSTEM_RUN_DENIED: allowlist miss, got %v", err)
		}
		// What the engine could not analyse is a miss too, never an allow.
		_, err = h.run([]string{"/bin/sh", "-c", "echo `id -u`"}, 20000)
		if err == nil || !strings.Contains(err.Error(), "SYSTEM_RUN_DENIED") {
			t.Fatalf("want SYSTEM_RUN_DENIED for a command substitution, got %v", err)
		}
	})

	t.Run("ask with no approver reachable applies askFallback", func(t *testing.T) {
		// Agent "asker" asks on a miss; no `exechost approver` runs on the
		// node, so its askFallback (deny) decides, and says so.
		_, err := h.runAs("asker", []string{"/usr/bin/id", "-u"}, 20000)
		if err == nil || !strings.Contains(err.Error(), "SYSTEM_RUN_DENIED") {
			t.Fatalf("want SYSTEM_RUN_DENIED from askFallback, got %v", err)
		}
		data, err := os.ReadFile(filepath.Join(nodeDir, "audit.jsonl"))
		if err != nil || !strings.Contains(string(data), "hello from exechost") || !strings.Contains(string(data), "/usr/bin/id") {
			t.Fatalf("audit log lacks the runs and the denial (err %v):\n%s", err, lastBytes(string(data), 3000))
		}
	})

	t.Run("execApprovals get/set: the gateway may tighten, only the node widens", func(t *testing.T) {
		type snapshot struct {
			Path   string         `json:"path"`
			Exists bool           `json:"exists"`
			Hash   string         `json:"hash"`
			File   map[string]any `json:"file"`
		}
		get := func() snapshot {
			t.Helper()
			var snap snapshot
			if err := h.call("exec.approvals.node.get", map[string]any{"nodeId": h.devID}, &snap); err != nil {
				t.Fatal(err)
			}
			return snap
		}
		snap := get()
		if !snap.Exists || snap.Hash == "" || snap.Path != filepath.Join(nodeDir, "exec-approvals.json") {
			t.Fatalf("snapshot %+v", snap)
		}
		if sock, _ := snap.File["socket"].(map[string]any); sock != nil && sock["token"] != nil && sock["token"] != "" {
			t.Fatalf("socket token leaked: %v", sock)
		}
		star := func(f map[string]any) map[string]any { return f["agents"].(map[string]any)["*"].(map[string]any) }
		before, _ := os.ReadFile(filepath.Join(nodeDir, "exec-approvals.json"))

		// Widening (a new pattern) from the gateway: refused, nothing written.
		star(snap.File)["allowlist"] = append(star(snap.File)["allowlist"].([]any), map[string]any{"pattern": "/usr/bin/id"})
		err := h.call("exec.approvals.node.set", map[string]any{"nodeId": h.devID, "file": snap.File, "baseHash": snap.Hash}, nil)
		if err == nil || !strings.Contains(err.Error(), "may only tighten") || !strings.Contains(err.Error(), `+"/usr/bin/id"`) ||
			!strings.Contains(err.Error(), "--allow-remote-widening") {
			t.Fatalf("widening set: want a refusal naming the pattern and the setting, got %v", err)
		}
		if after, _ := os.ReadFile(filepath.Join(nodeDir, "exec-approvals.json")); string(after) != string(before) {
			t.Fatalf("a refused set changed the file:\n%s", after)
		}
		if _, err := h.run([]string{"/usr/bin/id", "-u"}, 20000); err == nil {
			t.Fatal("id ran after a refused widening")
		}

		// The node itself may widen: its own CLI.
		if out, err := exec.Command(bin, "--state-dir", nodeDir, "approvals", "allowlist", "add", "/usr/bin/id").CombinedOutput(); err != nil {
			t.Fatalf("local allowlist add: %v\n%s", err, out)
		}
		if res, err := h.run([]string{"/usr/bin/id", "-u"}, 20000); err != nil || res.ExitCode != 0 {
			t.Fatalf("id after allowlisting on the node: %+v %v", res, err)
		}

		// Tightening from the gateway (drop that pattern again) is applied
		// and enforced; the socket token stays the node's own.
		snap = get()
		var kept []any
		for _, e := range star(snap.File)["allowlist"].([]any) {
			if e.(map[string]any)["pattern"] != "/usr/bin/id" {
				kept = append(kept, e)
			}
		}
		star(snap.File)["allowlist"] = kept
		var after snapshot
		if err := h.call("exec.approvals.node.set", map[string]any{"nodeId": h.devID, "file": snap.File, "baseHash": snap.Hash}, &after); err != nil {
			t.Fatal(err)
		}
		if after.Hash == snap.Hash {
			t.Fatal("hash unchanged after set")
		}
		data, err := os.ReadFile(filepath.Join(nodeDir, "exec-approvals.json"))
		if err != nil || strings.Contains(string(data), "/usr/bin/id") || !strings.Contains(string(data), `"token"`) {
			t.Fatalf("file after set (err %v):\n%s", err, data)
		}
		// A stale editor loses and changes nothing.
		err = h.call("exec.approvals.node.set", map[string]any{"nodeId": h.devID, "file": snap.File, "baseHash": snap.Hash}, nil)
		if err == nil || !strings.Contains(err.Error(), "changed") {
			t.Fatalf("stale set: want a reload error, got %v", err)
		}
		if _, err := h.run([]string{"/usr/bin/id", "-u"}, 20000); err == nil || !strings.Contains(err.Error(), "SYSTEM_RUN_DENIED") {
			t.Fatalf("id after the gateway removed it: want SYSTEM_RUN_DENIED, got %v", err)
		}
	})

	t.Run("timeout kills the whole process tree", func(t *testing.T) {
		marker := fmt.Sprintf("%d", 4000+time.Now().UnixNano()%5000)
		res, err := h.run([]string{"/bin/sh", "-c", "sleep " + marker + " & sleep " + marker + "; echo never"}, 1500)
		if err != nil {
			t.Fatal(err)
		}
		if !res.TimedOut || res.Success || strings.Contains(res.Stdout, "never") {
			t.Fatalf("result %+v", res)
		}
		waitGone(t, "sleep "+marker)
	})

	t.Run("pairing required until an operator approves", func(t *testing.T) {
		lan := octest.LANAddr()
		if lan == "" {
			t.Skip("no non-loopback IPv4 address on this machine: OpenClaw pairs loopback nodes by itself, so pairing-required cannot be provoked")
		}
		dir := filepath.Join(tmp, "remote-node")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "exec-approvals.json"), []byte(approvalsFile), 0o600); err != nil {
			t.Fatal(err)
		}
		url := fmt.Sprintf("ws://%s:%d", lan, gw.Port)
		p, err := testproc.Start([]string{bin, "--state-dir", dir, "node", "run", "--openclaw", url,
			"--openclaw-token-file", tokenFile(t, gw.Token), "--display-name", "exechost-remote"},
			// The LAN address is plain ws:// off loopback, refused unless the risk is accepted.
			"EXECHOST_INSECURE_PLAINTEXT=1")
		if err != nil {
			t.Fatal(err)
		}
		defer p.Stop(10 * time.Second)
		// The node prints what the operator must run, with the request id.
		var reqID string
		deadline := time.Now().Add(waitNode)
		for reqID == "" {
			out := p.Out.String()
			if i := strings.Index(out, "openclaw devices approve "); i >= 0 {
				if f := strings.Fields(out[i+len("openclaw devices approve "):]); len(f) > 0 {
					reqID = f[0]
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no pairing hint from the node:\n%s", out)
			}
			time.Sleep(pollPeriod)
		}
		if err := h.call("device.pair.approve", map[string]any{"requestId": reqID}, nil); err != nil {
			t.Fatalf("device.pair.approve %s: %v\n%s", reqID, err, p.Out.String())
		}
		remote := &harness{t: t, gw: gw, op: h.op, name: "exechost-remote"}
		n := remote.waitNode(true)
		remote.devID = n.NodeID
		res, err := remote.run([]string{"echo", "paired"}, 20000)
		if err != nil || res.Stdout != "paired\n" {
			t.Fatalf("remote node after pairing: %+v %v\n%s", res, err, p.Out.String())
		}
	})

	t.Run("reconnects after the gateway restarts", func(t *testing.T) {
		h.op.Close("restarting gateway")
		h.gw.Stop()
		if err := h.gw.Start(); err != nil {
			t.Fatal(err)
		}
		h.connectOperator()
		h.waitNode(false)
		res, err := h.run([]string{"echo", "again"}, 20000)
		if err != nil || res.Stdout != "again\n" {
			t.Fatalf("after restart: %+v %v", res, err)
		}
	})
}

// startGateway builds exechost and starts a real OpenClaw gateway bound as
// bind says, in a temporary directory it returns; without OpenClaw
// installed the test skips loudly.
func startGateway(t *testing.T, bind string) (tmp, bin string, gw *octest.Gateway) {
	t.Helper()
	return startGatewayWith(t, bind, nil)
}

// startGatewayWith is startGateway with config as the gateway's
// openclaw.json (octest.StartGatewayWithConfig).
func startGatewayWith(t *testing.T, bind string, config map[string]any) (tmp, bin string, gw *octest.Gateway) {
	t.Helper()
	in, err := octest.Find()
	if err != nil {
		testdep.Missing(t, "openclaw", err.Error())
	}
	tmp = t.TempDir()
	if bin, err = testproc.Build(tmp, os.Getenv("EXECHOST_E2E_RACE") != ""); err != nil {
		t.Fatal(err)
	}
	if gw, err = octest.StartGatewayWithConfig(in, filepath.Join(tmp, "gateway"), bind, config); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Stop)
	return tmp, bin, gw
}

func (h *harness) connectOperator() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callLimit)
	defer cancel()
	for {
		op, err := openclaw.DialOperatorWith(ctx, h.gw.URL, h.gw.Token, h.opID, "test", bridge.Options{NoPing: true})
		if err == nil {
			h.op = op
			h.t.Cleanup(func() { op.Close("test done") })
			return
		}
		// A just-restarted gateway may still be starting its sidecars.
		if ctx.Err() != nil {
			h.t.Fatalf("operator connect: %v", err)
		}
		time.Sleep(pollPeriod)
	}
}

func (h *harness) call(method string, params, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), callLimit)
	defer cancel()
	return h.op.Call(ctx, method, params, out)
}

// waitNode waits until the exechost node is connected with its command
// surface; approve approves a pending surface on the way, as an operator
// running `openclaw nodes approve` would.
func (h *harness) waitNode(approve bool) nodeInfo {
	h.t.Helper()
	deadline := time.Now().Add(waitNode)
	var last nodeInfo
	for time.Now().Before(deadline) {
		var list struct {
			Nodes []nodeInfo `json:"nodes"`
		}
		if err := h.call("node.list", map[string]any{}, &list); err != nil {
			h.t.Fatalf("node.list: %v", err)
		}
		for _, n := range list.Nodes {
			if n.DisplayName != h.name {
				continue
			}
			last = n
			if approve && n.PendingRequestID != "" {
				if err := h.call("node.pair.approve", map[string]any{"requestId": n.PendingRequestID}, nil); err != nil {
					h.t.Fatalf("node.pair.approve: %v", err)
				}
			}
			if n.Connected && slices.Contains(n.Commands, openclaw.CmdSystemRun) {
				return n
			}
		}
		time.Sleep(pollPeriod)
	}
	h.t.Fatalf("exechost node not connected with its commands after %s; last seen %+v", waitNode, last)
	return last
}

// runResult is system.run's payload.
type runResult struct {
	ExitCode  int    `json:"exitCode"`
	TimedOut  bool   `json:"timedOut"`
	Success   bool   `json:"success"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	Truncated bool   `json:"truncated"`
	Error     string `json:"error"`
}

// run calls the gateway's node.invoke with system.run, as OpenClaw's exec
// tool does.
func (h *harness) run(argv []string, timeoutMs int64) (runResult, error) {
	return h.runAs("", argv, timeoutMs)
}

func (h *harness) runAs(agent string, argv []string, timeoutMs int64) (runResult, error) {
	var res runResult
	params := map[string]any{"command": argv, "timeoutMs": timeoutMs, "sessionKey": "agent:main:main"}
	if agent != "" {
		params["agentId"] = agent
	}
	var out struct {
		OK          bool            `json:"ok"`
		Payload     json.RawMessage `json:"payload"`
		PayloadJSON *string         `json:"payloadJSON"`
	}
	err := h.call("node.invoke", map[string]any{
		"nodeId": h.devID, "command": "system.run",
		"params":         params,
		"timeoutMs":      timeoutMs + 30000,
		"idempotencyKey": uuid.NewString(),
	}, &out)
	if err != nil {
		return res, err
	}
	raw := []byte(out.Payload)
	if out.PayloadJSON != nil {
		raw = []byte(*out.PayloadJSON)
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return res, fmt.Errorf("decode system.run payload %s: %w", raw, err)
	}
	return res, nil
}

// waitGone waits until no process's command line contains needle.
func waitGone(t *testing.T, needle string) {
	t.Helper()
	deadline := time.Now().Add(reapLimit)
	for {
		left := procsMatching(needle)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left behind: %v", left)
		}
		time.Sleep(pollPeriod)
	}
}

func procsMatching(needle string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmd := strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " ")
		if cmd == needle {
			out = append(out, e.Name()+": "+cmd)
		}
	}
	return out
}

func lastBytes(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// tokenFile writes the gateway's token to a 0600 file for
// --openclaw-token-file (a secret is never passed in argv).
func tokenFile(t *testing.T, token string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "openclaw-token")
	if err := os.WriteFile(f, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}
