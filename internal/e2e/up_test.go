package e2e

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/testproc"
)

var (
	upGatewayRE  = regexp.MustCompile(`gateway\s+(ws://[0-9.:]+)`)
	upApproverRE = regexp.MustCompile(`approver\s+(http://\S+)`)
)

// upProc is a running `exechost up` whose summary has been printed.
type upProc struct {
	p        *proc
	url      string // the gateway's ws:// URL
	approver string // the approver web UI's URL, as printed
}

// startUp starts `exechost up` on dir (loopback, ephemeral ports) and
// waits for its summary; it fails the test if up exits first.
func startUp(t *testing.T, dir string, extra ...string) *upProc {
	t.Helper()
	p := start(t, dir, append([]string{"up", "--listen", "127.0.0.1:0", "--web", "127.0.0.1:0"}, extra...)...)
	// "MCP clients:" is the summary's last line.
	waitFor(t, "up to print its summary", func() bool {
		return strings.Contains(p.Out.String(), "MCP clients:") || isDone(p)
	})
	out := p.Out.String()
	m := upGatewayRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no gateway URL in up's output:\n%s", out)
	}
	u := &upProc{p: p, url: m[1]}
	if a := upApproverRE.FindStringSubmatch(out); a != nil {
		u.approver = a[1]
	}
	return u
}

// stop sends Ctrl-C and waits for a clean exit.
func (u *upProc) stop(t *testing.T) {
	t.Helper()
	u.p.signal(os.Interrupt)
	if err := u.p.wait(t, "up after Ctrl-C"); err != nil {
		t.Fatalf("up exited with %v after Ctrl-C:\n%s", err, u.p.Out)
	}
	if !strings.Contains(u.p.Out.String(), "exechost: stopped") {
		t.Errorf("no clean stop message:\n%s", u.p.Out)
	}
}

// TestUpRestarts is the first hour's blocker: `up` run, stopped and run
// again on the same state directory prints its full summary and serves
// exec every time, through the same (reused) local node.
func TestUpRestarts(t *testing.T) {
	dir := newStateDir(t, "up")
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	var nodeID string
	for i := range 3 {
		u := startUp(t, dir)
		out := u.p.Out.String()
		wants := []string{"exechost is up", "(connected, this machine)", "exec --gateway " + u.url, "Next, in another terminal"}
		if i == 0 {
			wants = append(wants, "security=allowlist ask=on-miss askFallback=deny", "exec without a node goes to this node (tools.exec.defaultNode)")
		} else {
			wants = append(wants, "(kept as it is)")
		}
		for _, want := range wants {
			if !strings.Contains(out, want) {
				t.Errorf("run %d: output lacks %q:\n%s", i+1, want, out)
			}
		}
		// Later runs reuse the pairing; they do not pair again.
		if i > 0 && strings.Contains(out, "pairs again") {
			t.Errorf("run %d: the local node paired again:\n%s", i+1, out)
		}
		// The approver URL is printed with its secret (a bare URL is 403).
		if u.approver == "" || !strings.ContainsAny(u.approver, "?#") {
			t.Errorf("run %d: approver URL %q lacks its secret:\n%s", i+1, u.approver, out)
		}
		if i == 0 {
			if r := run(t, dir, "approvals", "allowlist", "add", truePath); r.code != 0 {
				t.Fatalf("allowlist add: %s", r)
			}
		}
		r := run(t, dir, "exec", "--gateway", u.url, "--json", truePath)
		if r.code != 0 || !strings.Contains(r.stdout, `"host": "node"`) {
			t.Fatalf("run %d: exec through up: %s", i+1, r)
		}
		var nodes bridge.NodesResult
		r = run(t, dir, "nodes", "list", "--gateway", u.url, "--json")
		if err := json.Unmarshal([]byte(r.stdout), &nodes); err != nil || r.code != 0 {
			t.Fatalf("nodes list: %v\n%s", err, r)
		}
		if len(nodes.Nodes) != 1 || !nodes.Nodes[0].Connected {
			t.Fatalf("run %d: want exactly one connected node, got %+v", i+1, nodes.Nodes)
		}
		if i == 0 {
			nodeID = nodes.Nodes[0].NodeID
		} else if nodes.Nodes[0].NodeID != nodeID {
			t.Errorf("run %d: node %s, want the paired node %s reused", i+1, nodes.Nodes[0].NodeID, nodeID)
		}
		u.stop(t)
	}
}

// TestUpPortTaken: a second `up` on a port an exechost gateway holds says
// so and how to fix it, and exits 1 instead of waiting.
func TestUpPortTaken(t *testing.T) {
	dir := newStateDir(t, "up")
	u := startUp(t, dir, "--no-approver")
	listen := strings.TrimPrefix(u.url, "ws://")
	other := newStateDir(t, "other")
	// The same gateway as far as a client can tell: its token and its
	// identity key (which the client pins).
	for _, name := range []string{"gateway.json", "gateway.key"} {
		if err := os.WriteFile(filepath.Join(other, name), mustRead(t, filepath.Join(dir, name)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := run(t, other, "up", "--listen", listen, "--web", "127.0.0.1:0", "--no-approver")
	if r.code != 1 || !strings.Contains(r.stderr, listen+" is already in use by an exechost gateway of this state directory") ||
		!strings.Contains(r.stderr, "hint:") {
		t.Fatalf("second up on a taken port: %s", r)
	}
	// Another state directory's gateway (no token for it here): still
	// recognised as an exechost gateway.
	r = run(t, newStateDir(t, "stranger"), "up", "--listen", listen, "--web", "127.0.0.1:0", "--no-approver")
	if r.code != 1 || !strings.Contains(r.stderr, listen+" is already in use by another exechost gateway, of another state directory") {
		t.Fatalf("up on a port another state directory's gateway holds: %s", r)
	}
	// The approver's web port taken (by anything): said so, with the fix.
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	third := newStateDir(t, "third")
	r = run(t, third, "up", "--listen", "127.0.0.1:0", "--web", held.Addr().String())
	if r.code != 1 || !strings.Contains(r.stderr, "the approver web UI's address "+held.Addr().String()+" is already in use") {
		t.Fatalf("up with its web port taken: %s", r)
	}
	// That failed run created exec-approvals.json but never showed its
	// summary: the next run still explains the created defaults, and
	// under --no-approver its "Next" text promises no approver.
	u3 := startUp(t, third, "--no-approver")
	out := u3.p.Out.String()
	if !strings.Contains(out, "created: security=allowlist ask=on-miss askFallback=deny") || !strings.Contains(out, "exechost.json created") {
		t.Errorf("the run after a failed up does not explain the created defaults:\n%s", out)
	}
	if _, next, _ := strings.Cut(out, "Next"); strings.Contains(next, "approver") || strings.Contains(next, " ask") {
		t.Errorf("--no-approver: the Next text mentions an approver:\n%s", out)
	}
	u3.stop(t)
	u3 = startUp(t, third, "--no-approver")
	if out := u3.p.Out.String(); !strings.Contains(out, "(kept as it is)") {
		t.Errorf("the run after a summary still calls the defaults created:\n%s", out)
	}
	u3.stop(t)
	// The same state directory: refused at once, whatever the ports.
	r = run(t, dir, "up", "--listen", "127.0.0.1:0", "--web", "127.0.0.1:0", "--no-approver")
	if r.code != 1 || !strings.Contains(r.stderr, "another `exechost up` is already running on "+dir) {
		t.Fatalf("second up on the same state directory: %s", r)
	}
}

// TestUpDenialsAndExitCodes runs the exit-code contract and the denial
// explanation against a real `up` (no approver, so a miss falls back to
// askFallback=deny at once): what was missing, which file and level
// decided, and a fixing command that, run literally, makes the command
// pass.
func TestUpDenialsAndExitCodes(t *testing.T) {
	dir := newStateDir(t, "up")
	u := startUp(t, dir, "--no-approver")
	three := filepath.Join(t.TempDir(), "three")
	if err := os.WriteFile(three, []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	id, err := exec.LookPath("id")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{three, sleep} {
		if r := run(t, dir, "approvals", "allowlist", "add", p); r.code != 0 {
			t.Fatalf("allowlist add %s: %s", p, r)
		}
	}
	ex := func(args ...string) result {
		t.Helper()
		return run(t, dir, append([]string{"exec", "--gateway", u.url}, args...)...)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"command's own status", []string{three}, 3},
		{"timeout", []string{"--timeout", "1", sleep + " 30"}, 124},
		{"denied", []string{id}, 126},
		{"unknown node", []string{"--host", "node", "--node", "nosuch", "true"}, 1},
		{"usage before dialling", []string{"--ask", "sometimes", "true"}, 2},
	} {
		if r := ex(tc.args...); r.code != tc.code {
			t.Errorf("%s: exec %v exited %d, want %d\n%s", tc.name, tc.args, r.code, tc.code, r)
		}
	}

	// The plain CLI names what is missing, where the policy came from and
	// the fixing command.
	r := ex(id)
	for _, want := range []string{"exechost: denied: SYSTEM_RUN_DENIED", "missing: " + id, "policy: askFallback=deny from defaults (host ", filepath.Join(dir, "exec-approvals.json"), "fix: exechost approvals allowlist add --node "} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("plain denial lacks %q:\n%s", want, r)
		}
	}
	// --json: exactly one object on stdout, with the same facts.
	r = ex("--json", id)
	var obj map[string]any
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	if err := dec.Decode(&obj); err != nil || dec.More() {
		t.Fatalf("exec --json denial: want exactly one JSON object on stdout (%v):\n%s", err, r)
	}
	if obj["code"] != bridge.CodeDenied || obj["exitCode"] != float64(126) || obj["reason"] != "approval required" || obj["fix"] == nil {
		t.Errorf("exec --json denial object: %v", obj)
	}
	if m, _ := obj["missing"].([]any); len(m) != 1 || m[0] != id {
		t.Errorf("missing = %v, want [%s]", obj["missing"], id)
	}
	pol, _ := obj["policy"].(map[string]any)
	if pol["level"] != "defaults" || pol["file"] != filepath.Join(dir, "exec-approvals.json") {
		t.Errorf("policy = %v", pol)
	}
	// The fix, run literally, makes the command pass.
	fix, _ := obj["fix"].(string)
	argv := strings.Fields(fix)
	if len(argv) < 4 || argv[0] != "exechost" {
		t.Fatalf("fix %q is not an exechost command", fix)
	}
	if r := run(t, dir, append(argv[1:], "--gateway", u.url)...); r.code != 0 {
		t.Fatalf("fix %q: %s", fix, r)
	}
	if r := ex(id); r.code != 0 {
		t.Fatalf("after the fix, exec %s: %s", id, r)
	}

	// A construct is named with its position; there is no allowlist fix.
	// (Backquotes: $(…) in argument position is allowed under the
	// contained rules, where the jail holds.)
	r = ex("--json", "echo `id`")
	obj = nil
	if err := json.Unmarshal([]byte(r.stdout), &obj); err != nil || r.code != 126 {
		t.Fatalf("construct denial: %v\n%s", err, r)
	}
	if obj["construct"] != "command substitution `…`" || obj["position"] != "1:6" || obj["fix"] != nil {
		t.Errorf("construct denial object: %v", obj)
	}

	// host=gateway: the gateway's own file is the source.
	r = ex("--host", "gateway", "--json", "whoami")
	obj = nil
	if err := json.Unmarshal([]byte(r.stdout), &obj); err != nil || r.code != 126 {
		t.Fatalf("host=gateway denial: %v\n%s", err, r)
	}
	if pol, _ := obj["policy"].(map[string]any); pol["host"] != "gateway" || pol["file"] != filepath.Join(dir, "exec-approvals.json") {
		t.Errorf("host=gateway denial policy = %v", obj["policy"])
	}
	if fix, _ := obj["fix"].(string); !strings.HasPrefix(fix, "exechost approvals allowlist add --agent main /") {
		t.Errorf("host=gateway fix = %q, want a local allowlist add", fix)
	}

	// Events: a call prints its own, not those of earlier calls, unless
	// --events all. A deny the gateway decides (a requested
	// security=deny) queues its "Exec denied" event before answering.
	if r := ex("--security", "deny", three); r.code != 126 {
		t.Fatalf("requested security=deny: %s", r)
	}
	if r := ex(three); r.code != 3 || strings.Contains(r.stderr, "Exec denied") {
		t.Errorf("another call's event printed by default:\n%s", r)
	}
	if r := ex("--security", "deny", three); r.code != 126 || !strings.Contains(r.stderr, "policy: security=deny from request (the exec call)") {
		t.Fatalf("requested security=deny: %s", r)
	}
	if r := ex("--events", "all", three); r.code != 3 || !strings.Contains(r.stderr, "[event] Exec denied") {
		t.Errorf("--events all does not print the session's earlier events:\n%s", r)
	}

	// A typo in the approvals file is reported by `approvals get` and in
	// the denial it may have caused.
	policyFile := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policyFile, []byte(`{"version":1,"defaults":{"security":"allowlist","ask":"on-miss","askFallback":"deny"},"agents":{"main":{"allowlst":[{"pattern":"/usr/bin/uname"}]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := run(t, dir, "approvals", "set", "--file", policyFile); r.code != 0 {
		t.Fatalf("approvals set: %s", r)
	}
	if r := run(t, dir, "approvals", "get"); !strings.Contains(r.stdout, "unknown key agents.main.allowlst (did you mean allowlist?)") {
		t.Errorf("approvals get does not report the unknown key:\n%s", r)
	}
	if r := ex("uname"); r.code != 126 || !strings.Contains(r.stderr, "agents.main.allowlst") {
		t.Errorf("denial does not mention the unknown key:\n%s", r)
	}

	// 125: a paired node that is offline.
	r = run(t, dir, "gateway", "join-key", "--gateway", u.url)
	if r.code != 0 {
		t.Fatalf("join-key: %s", r)
	}
	offDir := newStateDir(t, "offline-node")
	off := start(t, offDir, "node", "run", "--gateway", u.url, "--join-key-file", keyFile(t, strings.TrimSpace(r.stdout)), "--display-name", "offline-box")
	nodeState := func(state string) func() bool {
		return func() bool {
			r := run(t, dir, "nodes", "list", "--gateway", u.url)
			for line := range strings.SplitSeq(r.stdout, "\n") {
				if strings.Contains(line, "offline-box") && strings.Contains(line, " "+state+" ") {
					return true
				}
			}
			return false
		}
	}
	waitFor(t, "offline-box to connect", nodeState("connected"))
	off.kill(t)
	waitFor(t, "offline-box to be disconnected", nodeState("disconnected"))
	if r := ex("--host", "node", "--node", "offline-box", three); r.code != 125 || !strings.Contains(r.stderr, "not connected") {
		t.Errorf("exec on an offline node: want 125, got %s", r)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func isDone(p *proc) bool {
	select {
	case <-p.Done():
		return true
	default:
		return false
	}
}

// TestUpFromGoRun runs `up` from where `go run` puts its binary (a
// go-build work directory, deleted when it exits): up says so first, with
// the install line and the installed path, and its "Next" commands and MCP
// config name that path, never the temporary one.
func TestUpFromGoRun(t *testing.T) {
	work := filepath.Join(t.TempDir(), "go-build1234", "b001", "exe")
	if err := os.MkdirAll(work, 0o700); err != nil {
		t.Fatal(err)
	}
	tmpBin := filepath.Join(work, "exechost")
	if err := os.WriteFile(tmpBin, mustRead(t, bin), 0o700); err != nil {
		t.Fatal(err)
	}
	gobin := t.TempDir()
	t.Setenv("GOBIN", gobin)
	dir := newStateDir(t, "up")
	tp, err := testproc.Start([]string{tmpBin, "--state-dir", dir, "up", "--listen", "127.0.0.1:0", "--web", "127.0.0.1:0", "--no-approver"})
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{tp}
	t.Cleanup(func() { p.kill(t) })
	waitFor(t, "up to print its summary", func() bool {
		return strings.Contains(p.Out.String(), "Next, in another terminal") || isDone(p)
	})
	out := p.Out.String()
	installed := filepath.Join(gobin, "exechost")
	if !strings.HasPrefix(out, "note: this exechost is a temporary build of `go run` ("+tmpBin+")") ||
		!strings.Contains(out, " && CGO_ENABLED=0 go install ./cmd/exechost    # puts it at "+installed) {
		t.Errorf("up from a go run build does not say so first, with the install line and path:\n%s", out)
	}
	_, next, _ := strings.Cut(out, "Next, in another terminal")
	if strings.Contains(next, tmpBin) || !strings.Contains(next, installed+" --state-dir") || !strings.Contains(next, `"command": "`+installed+`"`) {
		t.Errorf("Next and MCP config should name %s, not the temporary build:\n%s", installed, out)
	}
}
