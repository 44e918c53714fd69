//go:build linux

package openclaw_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/exechost/exechost/internal/openclaw"
	"github.com/exechost/exechost/internal/openclaw/octest"
	"github.com/exechost/exechost/internal/testproc"
)

// conformancePolicy is the policy both node hosts start with: OpenClaw's
// node host's own default (security full, ask off), which exechost's node
// gets as its file. allowlistPolicy is then set on both (on exechost's by
// its own CLI: the new patterns widen), then denyPolicy through the
// gateway, a tightening each must accept. (OpenClaw's node host runs an
// allowlisted command only for a request with an agentId: it records the
// entry's use per agent and refuses the run, "approval state could not be
// persisted", when it cannot; its exec tool always sends one.)
const (
	conformancePolicy = `{"version":1,"defaults":{"security":"full","ask":"off","askFallback":"deny"},"agents":{}}`
	allowlistPolicy   = `{"version":1,"defaults":{"security":"allowlist","ask":"off","askFallback":"deny"},"agents":{"*":{"allowlist":[{"pattern":"/usr/bin/echo"},{"pattern":"/bin/echo"}]}}}`
	denyPolicy        = `{"version":1,"defaults":{"security":"deny","ask":"off","askFallback":"deny"},"agents":{}}`
	// allowlistImplicit is allowlistPolicy as OpenClaw's own UI would
	// send it, without ask and askFallback: OpenClaw's node host reads
	// them as off and deny, and so must exechost's (its own built-ins are
	// on-miss and deny).
	allowlistImplicit = `{"version":1,"defaults":{"security":"allowlist"},"agents":{"*":{"allowlist":[{"pattern":"/usr/bin/echo"},{"pattern":"/bin/echo"}]}}}`
)

// recorder is a WebSocket proxy on loopback between one node host and the
// gateway: it forwards every frame unchanged and records the node.event
// requests the node sends, which is what the gateway receives, and the
// node.invoke.request events the gateway sends the node.
type recorder struct {
	port    int
	mu      sync.Mutex
	events  []recordedEvent
	invokes []recordedInvoke
}

// recordedInvoke is one node.invoke.request the node received.
type recordedInvoke struct {
	Command    string
	SessionKey string
	RunID      string
}

type recordedEvent struct {
	Event   string
	Payload map[string]any
}

func startRecorder(t *testing.T, gatewayURL string) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{port: ln.Addr().(*net.TCPAddr).Port}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		in, err := websocket.Accept(w, req, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		in.SetReadLimit(-1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		out, _, err := websocket.Dial(ctx, gatewayURL, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": req.Header["Origin"]}})
		if err != nil {
			in.Close(websocket.StatusInternalError, "gateway unreachable")
			return
		}
		out.SetReadLimit(-1)
		pump := func(src, dst *websocket.Conn, record bool) {
			defer cancel()
			for {
				typ, data, err := src.Read(ctx)
				if err != nil {
					return
				}
				if record {
					r.note(data)
				} else {
					r.noteInvoke(data)
				}
				if dst.Write(ctx, typ, data) != nil {
					return
				}
			}
		}
		go pump(out, in, false)
		pump(in, out, true)
		in.CloseNow()
		out.CloseNow()
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return r
}

func (r *recorder) note(frame []byte) {
	var f struct {
		Type   string `json:"type"`
		Method string `json:"method"`
		Params struct {
			Event       string `json:"event"`
			PayloadJSON string `json:"payloadJSON"`
		} `json:"params"`
	}
	if json.Unmarshal(frame, &f) != nil || f.Type != "req" || f.Method != "node.event" {
		return
	}
	var p map[string]any
	_ = json.Unmarshal([]byte(f.Params.PayloadJSON), &p)
	r.mu.Lock()
	r.events = append(r.events, recordedEvent{f.Params.Event, p})
	r.mu.Unlock()
}

func (r *recorder) noteInvoke(frame []byte) {
	var f struct {
		Type    string `json:"type"`
		Event   string `json:"event"`
		Payload struct {
			Command    string `json:"command"`
			ParamsJSON string `json:"paramsJSON"`
		} `json:"payload"`
	}
	if json.Unmarshal(frame, &f) != nil || f.Type != "event" || f.Event != "node.invoke.request" {
		return
	}
	var p struct {
		SessionKey string `json:"sessionKey"`
		RunID      string `json:"runId"`
	}
	_ = json.Unmarshal([]byte(f.Payload.ParamsJSON), &p)
	r.mu.Lock()
	r.invokes = append(r.invokes, recordedInvoke{f.Payload.Command, p.SessionKey, p.RunID})
	r.mu.Unlock()
}

// invokedFor returns the commands the gateway invoked for sessionKey, in
// order, and the run id of its system.run.
func (r *recorder) invokedFor(sessionKey string) (commands []string, runID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, in := range r.invokes {
		if in.SessionKey == sessionKey {
			commands = append(commands, in.Command)
			if in.Command == openclaw.CmdSystemRun {
				runID = in.RunID
			}
		}
	}
	return commands, runID
}

// forRun returns the exec.* events recorded for runID.
func (r *recorder) forRun(runID string) []recordedEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []recordedEvent
	for _, e := range r.events {
		if strings.HasPrefix(e.Event, "exec.") && e.Payload["runId"] == runID {
			out = append(out, e)
		}
	}
	return out
}

// invokeOutcome is one node.invoke's answer as the operator sees it.
type invokeOutcome struct {
	OK      bool
	Payload map[string]any
	Code    string // the error's text up to the first ':' ("" when OK)
	Message string
}

func (h *harness) invoke(command string, params map[string]any, timeoutMs int64) invokeOutcome {
	h.t.Helper()
	var out struct {
		Payload     json.RawMessage `json:"payload"`
		PayloadJSON *string         `json:"payloadJSON"`
	}
	err := h.call("node.invoke", map[string]any{
		"nodeId": h.devID, "command": command, "params": params,
		"timeoutMs": timeoutMs, "idempotencyKey": uuid.NewString(),
	}, &out)
	if err != nil {
		msg := err.Error()
		code, _, _ := strings.Cut(msg, ":")
		return invokeOutcome{Code: strings.TrimSpace(code), Message: msg}
	}
	raw := []byte(out.Payload)
	if out.PayloadJSON != nil {
		raw = []byte(*out.PayloadJSON)
	}
	var p map[string]any
	if err := json.Unmarshal(raw, &p); err != nil {
		h.t.Fatalf("%s payload %s: %v", command, raw, err)
	}
	return invokeOutcome{OK: true, Payload: p}
}

// A conformance case: one request to both node hosts, and what of the
// answers and events is compared. Differences exechost makes on purpose
// are listed per case (docs/openclaw.md, "Intended differences").
type conformanceCase struct {
	name    string
	command string
	params  map[string]any // runId is filled in per node
	timeout int64
	// fields of the result payload compared (nil: every field);
	// ignore lists fields whose values differ on purpose.
	fields, ignore []string
	// eventFields of each exec.* event compared; nil compares none.
	eventFields []string
	// errorPrefix, when set, is the prefix both error messages must share.
	errorPrefix string
	// outputPrefix, when set, is the prefix both exec.finished outputs
	// must share.
	outputPrefix string
}

// TestConformanceWithOpenClawNodeHost sends the same table of requests to
// exechost's node and to OpenClaw's own node host on one real OpenClaw
// gateway, each behind a recording proxy, and compares the results and the
// events the gateway receives field by field, except for the intended
// differences each case names.
func TestConformanceWithOpenClawNodeHost(t *testing.T) {
	// OpenClaw's own exec tool is driven by a scripted model provider, not a
	// language model: the gateway's agent runs with it, exec goes to the
	// node hosts (tools.exec.host node), and the gateway itself neither
	// asks nor narrows (security full, ask off), so the nodes' policies
	// decide, as in the table below.
	model, err := octest.StartScriptedModel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(model.Close)
	tmp, bin, gw := startGatewayWith(t, "", map[string]any{
		"models": map[string]any{"mode": "merge", "providers": map[string]any{octest.ScriptedProvider: model.ProviderConfig()}},
		"agents": map[string]any{"defaults": map[string]any{"model": map[string]any{"primary": octest.ScriptedProvider + "/" + octest.ScriptedModelID}}},
		"tools":  map[string]any{"exec": map[string]any{"host": "node", "security": "full", "ask": "off"}},
	})

	ex := &harness{t: t, gw: gw, name: "conf-exechost"}
	oc := &harness{t: t, gw: gw, name: "conf-openclaw"}
	exRec, ocRec := startRecorder(t, gw.URL), startRecorder(t, gw.URL)

	exDir := filepath.Join(tmp, "exechost-node")
	if err := os.MkdirAll(exDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(exDir, "exec-approvals.json"), []byte(conformancePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	exProc, err := testproc.Start([]string{bin, "--state-dir", exDir, "node", "run",
		"--openclaw", fmt.Sprintf("ws://127.0.0.1:%d", exRec.port), "--openclaw-token-file", tokenFile(t, gw.Token), "--display-name", ex.name, "--approvals-route", "both"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exProc.Stop(10 * time.Second) })
	nh, err := octest.StartNodeHostVia(gw, filepath.Join(tmp, "openclaw-node"), oc.name, ocRec.port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nh.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("exechost node output:\n%s", lastBytes(exProc.Out.String(), 4000))
			t.Logf("openclaw node host output:\n%s", lastBytes(nh.Proc.Out.String(), 4000))
			t.Logf("gateway output (tail):\n%s", lastBytes(gw.Output(), 6000))
		}
	})
	if ex.opID, err = openclaw.LoadOrCreateIdentity(filepath.Join(tmp, "operator")); err != nil {
		t.Fatal(err)
	}
	ex.connectOperator()
	oc.opID, oc.op = ex.opID, ex.op
	ex.devID = ex.waitNode(true).NodeID
	oc.devID = oc.waitNode(true).NodeID

	// node.host.stats: both publish on connect, and the gateway keeps the
	// same fields for each (the values are each machine's own; these are
	// the same machine, but sampled at other moments).
	t.Run("node.host.stats", func(t *testing.T) {
		got, want := ex.waitHostStats(), oc.waitHostStats()
		if diff := cmp.Diff(keys(want), keys(got)); diff != "" {
			t.Errorf("hostStats fields (-OpenClaw +exechost):\n%s\nOpenClaw %v\nexechost %v", diff, want, got)
		}
		if got["cpuCount"] != want["cpuCount"] || got["memoryTotalBytes"] != want["memoryTotalBytes"] {
			t.Errorf("hostStats totals: exechost %v, OpenClaw %v", got, want)
		}
	})

	missing := filepath.Join(tmp, "no-such-dir")
	resultFields := []string{"exitCode", "timedOut", "success", "stdout", "stderr", "truncated", "error"}
	// Intended differences (docs/openclaw.md): a run that did not exit by
	// itself has exechost's error text; the exec.finished output of a run
	// that wrote to both streams is the interleaved tail (OpenClaw: stdout
	// then stderr), and its command for `sh -lc TEXT` is TEXT, what was
	// analysed (OpenClaw: the quoted argv); the prepared plan keeps the
	// request's argv (OpenClaw resolves argv[0] and adds policySnapshot and
	// mutableFileOperand) and claims no allowAlwaysCoverage.
	cases := []conformanceCase{
		{name: "argv", command: "system.run", params: map[string]any{"command": []string{"echo", "hello"}, "sessionKey": "agent:main:main"},
			fields: resultFields, eventFields: []string{"sessionKey", "host", "command", "exitCode", "timedOut", "success", "output", "suppressNotifyOnExit"}},
		{name: "shell text, stderr and exit code", command: "system.run",
			params: map[string]any{"command": []string{"/bin/sh", "-lc", "echo out; echo err >&2; exit 3"}, "rawCommand": "echo out; echo err >&2; exit 3"},
			fields: resultFields, eventFields: []string{"sessionKey", "host", "exitCode", "timedOut", "success", "suppressNotifyOnExit"}},
		{name: "suppressNotifyOnExit, no session", command: "system.run",
			params: map[string]any{"command": []string{"echo", "quiet"}, "suppressNotifyOnExit": true},
			fields: resultFields, eventFields: []string{"sessionKey", "host", "command", "exitCode", "success", "output", "suppressNotifyOnExit"}},
		{name: "timeout", command: "system.run", params: map[string]any{"command": []string{"sleep", "30"}, "timeoutMs": 1000}, timeout: invokeLimit,
			fields: resultFields, ignore: []string{"stderr"}, eventFields: []string{"sessionKey", "exitCode", "timedOut", "success", "output"}},
		{name: "bad cwd", command: "system.run", params: map[string]any{"command": []string{"echo", "x"}, "cwd": missing},
			fields: resultFields, ignore: []string{"error"}, eventFields: []string{"sessionKey", "exitCode", "timedOut", "success"}},
		{name: "relative cwd", command: "system.run", params: map[string]any{"command": []string{"echo", "x"}, "cwd": "no-such-relative-dir"},
			fields: resultFields, ignore: []string{"error"}, eventFields: []string{"sessionKey", "exitCode", "timedOut", "success"}},
		{name: "signal", command: "system.run", params: map[string]any{"command": []string{"/bin/sh", "-c", "kill -9 $$"}},
			fields: resultFields, ignore: []string{"error"}, eventFields: []string{"sessionKey", "exitCode", "timedOut", "success"}},
		{name: "env under a shell wrapper", command: "system.run",
			params: map[string]any{"command": []string{"/bin/sh", "-lc", `echo "$FOO|$LANG"`}, "rawCommand": `echo "$FOO|$LANG"`, "env": map[string]string{"FOO": "1", "LANG": "C"}},
			fields: resultFields, eventFields: []string{"sessionKey", "exitCode", "success", "output"}},
		{name: "env with argv", command: "system.run", params: map[string]any{"command": []string{"printenv", "FOO"}, "env": map[string]string{"FOO": "1"}},
			fields: resultFields, eventFields: []string{"sessionKey", "exitCode", "success", "output"}},
		{name: "truncated event output", command: "system.run",
			params: map[string]any{"command": []string{"/bin/sh", "-c", "head -c 30000 /dev/zero | tr '\\0' a"}},
			fields: []string{"exitCode", "timedOut", "success", "error"}, eventFields: []string{"sessionKey", "exitCode", "success"}, outputPrefix: "... (truncated) aaaa"},
		{name: "missing program", command: "system.run", params: map[string]any{"command": []string{missing + "/prog"}},
			fields: resultFields, ignore: []string{"error"}, eventFields: []string{"sessionKey", "exitCode", "timedOut", "success"}},
		{name: "dangerous env", command: "system.run", params: map[string]any{"command": []string{"echo", "x"}, "env": map[string]string{"LD_PRELOAD": "/x.so"}},
			errorPrefix: "INVALID_REQUEST: SYSTEM_RUN_DENIED: environment override rejected"},
		{name: "which", command: "system.which", params: map[string]any{"bins": []string{"sh", "no-such-program-xyz"}}},
		{name: "prepare", command: "system.run.prepare",
			params: map[string]any{"command": []string{"echo", "hi"}, "rawCommand": "echo hi", "cwd": tmp, "agentId": "main", "sessionKey": "agent:main:main"},
			fields: []string{"execPolicy"}},
	}
	var report []string
	runCases := func(cases []conformanceCase) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				report = append(report, compareCase(t, tc, ex, oc, exRec, ocRec))
			})
		}
	}
	runCases(cases)

	// An operator's approval in OpenClaw (exec.approval.request and
	// .resolve on the prepared plan), then the run with it, on both node
	// hosts: what was approved runs; a script rewritten after the approval,
	// or a run with another cwd or env, is refused; two approvals of one
	// command are two runs, also at once.
	for _, tc := range []approvedCase{
		{name: "approved script", script: "echo GOOD", want: "GOOD\n"},
		{name: "approved script changed before the run", script: "echo GOOD", rewrite: "echo EVIL > pwned",
			errorPrefix: "SYSTEM_RUN_DENIED: SYSTEM_RUN_DENIED: approval script operand changed before execution"},
		// The gateway sends the approved plan's cwd whatever the caller
		// says (both run the approved script where it was approved).
		{name: "approved, sent with another cwd", script: "echo GOOD", want: "GOOD\n", change: func(p map[string]any) { p["cwd"] = os.TempDir() }},
		{name: "approved, run with other env", script: "echo GOOD", change: func(p map[string]any) { p["env"] = map[string]string{"FOO": "2"} }},
		{name: "two approvals of one command, at once", script: "echo GOOD", want: "GOOD\n", twice: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			report = append(report, compareApproved(t, tc, tmp, ex, oc, exRec, ocRec))
		})
	}

	// OpenClaw's exec tool (system.run.prepare, the gateway's approval
	// analysis of the prepared plan, system.run), one agent turn per node
	// host with the same scripted call. The tool result is what the model
	// reads.
	for _, tc := range []struct {
		name string
		args map[string]any
	}{
		{"exec tool: stdout, stderr and exit code", map[string]any{"command": "echo out; echo err >&2; exit 3"}},
		{"exec tool: workdir", map[string]any{"command": "pwd", "workdir": tmp}},
		{"exec tool: timeout", map[string]any{"command": "sleep 30", "timeoutSeconds": 2}},
		{"exec tool: env under the shell wrapper", map[string]any{"command": `echo "$FOO|$LANG"`, "env": map[string]any{"FOO": "1", "LANG": "C"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			report = append(report, compareExecTool(t, model, tc.args, ex, oc, exRec, ocRec))
		})
	}

	// Set both to an allowlist of echo, then compare a hit and a miss. The
	// gateway may set it on OpenClaw's node host; exechost's counts the
	// new patterns as a widening (intended difference: remote edits only
	// tighten), so its own CLI sets it there.
	setPolicy := func(policy string, hs ...*harness) {
		for _, h := range hs {
			var snap struct {
				Hash string `json:"hash"`
			}
			if err := h.call("exec.approvals.node.get", map[string]any{"nodeId": h.devID}, &snap); err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			_ = json.Unmarshal([]byte(policy), &doc)
			if err := h.call("exec.approvals.node.set", map[string]any{"nodeId": h.devID, "file": doc, "baseHash": snap.Hash}, nil); err != nil {
				t.Fatalf("%s: tighten to %s: %v", h.name, policy, err)
			}
		}
	}
	f := filepath.Join(tmp, "allowlist.json")
	if err := os.WriteFile(f, []byte(allowlistPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "--state-dir", exDir, "approvals", "set", "--file", f).CombinedOutput(); err != nil {
		t.Fatalf("approvals set on the exechost node: %v\n%s", err, out)
	}
	setPolicy(allowlistPolicy, oc)
	// The same policy as OpenClaw's UI sends it (no ask, no askFallback),
	// through the gateway to both: a no-op for each, so the hit and the
	// miss below must still match (read with exechost's own defaults, the
	// miss would be asked about, not denied).
	setPolicy(allowlistImplicit, ex, oc)
	runCases([]conformanceCase{
		{name: "allowlist hit", command: "system.run", params: map[string]any{"command": []string{"echo", "listed"}, "agentId": "main", "sessionKey": "agent:main:main"},
			fields: resultFields, eventFields: []string{"sessionKey", "host", "command", "exitCode", "timedOut", "success", "output", "suppressNotifyOnExit"}},
		{name: "allowlist miss", command: "system.run", params: map[string]any{"command": []string{"id", "-u"}, "agentId": "main", "sessionKey": "agent:main:main"},
			errorPrefix: "SYSTEM_RUN_DENIED: SYSTEM_RUN_DENIED: allowlist miss", eventFields: []string{"sessionKey", "host", "command", "reason", "suppressNotifyOnExit"}},
	})

	// Tighten both to security=deny through the gateway (a remote change
	// each node host accepts without consent), then compare a denial.
	setPolicy(denyPolicy, ex, oc)
	runCases([]conformanceCase{
		{name: "security=deny", command: "system.run", params: map[string]any{"command": []string{"echo", "no"}, "sessionKey": "agent:main:main"},
			errorPrefix: "SYSTEM_RUN_DENIED: SYSTEM_RUN_DISABLED: security=deny", eventFields: []string{"sessionKey", "host", "command", "reason", "suppressNotifyOnExit"}},
	})
	t.Logf("conformance:\n%s", strings.Join(report, "\n"))

	// An operator's approval in OpenClaw, on the exechost node, which
	// takes gateway approvals (--approvals-route both) and now asks for
	// everything.
	t.Run("approval through the gateway", func(t *testing.T) {
		f := filepath.Join(tmp, "ask.json")
		if err := os.WriteFile(f, []byte(`{"version":1,"defaults":{"security":"full","ask":"always","askFallback":"deny"}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bin, "--state-dir", exDir, "approvals", "set", "--file", f).CombinedOutput(); err != nil {
			t.Fatalf("approvals set on the node: %v\n%s", err, out)
		}
		prep := ex.invoke("system.run.prepare", map[string]any{"command": []string{"/bin/sh", "-lc", "echo approved"}, "rawCommand": "echo approved",
			"cwd": tmp, "agentId": "main", "sessionKey": "agent:main:main"}, invokeLimit)
		if !prep.OK {
			t.Fatalf("prepare: %s", prep.Message)
		}
		plan := prep.Payload["plan"].(map[string]any)
		// No operator UI is connected: requireDeliveryRoute=false keeps the
		// request pending for this operator to resolve, as one would in
		// OpenClaw's Control UI.
		var req struct {
			Status string `json:"status"`
			ID     string `json:"id"`
		}
		if err := ex.call("exec.approval.request", map[string]any{"twoPhase": true, "requireDeliveryRoute": false,
			"command": plan["commandText"], "commandArgv": plan["argv"], "systemRunPlan": plan, "host": "node", "nodeId": ex.devID,
			"cwd": plan["cwd"], "agentId": "main", "sessionKey": "agent:main:main", "timeoutMs": 60000}, &req); err != nil || req.ID == "" {
			t.Fatalf("exec.approval.request: %+v %v", req, err)
		}
		if err := ex.call("exec.approval.resolve", map[string]any{"id": req.ID, "decision": "allow-once"}, nil); err != nil {
			t.Fatalf("exec.approval.resolve: %v", err)
		}
		params := map[string]any{"command": plan["argv"], "rawCommand": plan["commandText"], "cwd": plan["cwd"],
			"agentId": "main", "sessionKey": "agent:main:main", "systemRunPlan": plan, "runId": req.ID, "approved": true, "approvalDecision": "allow-once"}
		run := ex.invoke("system.run", params, invokeLimit)
		if !run.OK || run.Payload["stdout"] != "approved\n" {
			t.Fatalf("system.run with the operator's approval: %+v", run)
		}
		audit, _ := os.ReadFile(filepath.Join(exDir, "audit.jsonl"))
		if !strings.Contains(string(audit), "OpenClaw gateway operator (approval "+req.ID+")") {
			t.Errorf("the node's audit does not name the gateway approval:\n%s", lastBytes(string(audit), 3000))
		}
		// allow-once is single use: the same approval runs nothing again.
		if again := ex.invoke("system.run", params, invokeLimit); again.OK {
			t.Fatalf("the approval ran twice: %+v", again)
		}
	})
}

// compareCase sends tc to both node hosts and compares what the operator
// and the gateway got.
func compareCase(t *testing.T, tc conformanceCase, ex, oc *harness, exRec, ocRec *recorder) string {
	outcomes := map[string]invokeOutcome{}
	events := map[string][]recordedEvent{}
	for _, n := range []struct {
		h   *harness
		rec *recorder
	}{{ex, exRec}, {oc, ocRec}} {
		params := map[string]any{}
		for k, v := range tc.params {
			params[k] = v
		}
		runID := uuid.NewString()
		if tc.command == "system.run" {
			params["runId"] = runID
		}
		timeout := tc.timeout
		if timeout == 0 {
			// A bound for a hung node, not a speed claim: OpenClaw's node
			// host took over 20 s for `echo` at load 60 on 2 cores.
			timeout = invokeLimit
		}
		outcomes[n.h.name] = n.h.invoke(tc.command, params, timeout)
		events[n.h.name] = n.rec.forRun(runID)
	}
	got, want := outcomes[ex.name], outcomes[oc.name]
	if got.OK != want.OK {
		t.Fatalf("ok: exechost %v (%s %v), OpenClaw %v (%s %v)", got.OK, got.Message, got.Payload, want.OK, want.Message, want.Payload)
	}
	if tc.errorPrefix != "" {
		for name, o := range outcomes {
			if !strings.HasPrefix(o.Message, tc.errorPrefix) {
				t.Errorf("%s: error %q does not start with %q", name, o.Message, tc.errorPrefix)
			}
		}
	}
	if got.OK {
		fields := tc.fields
		if fields == nil {
			fields = keys(got.Payload, want.Payload)
		}
		for _, f := range fields {
			if slices.Contains(tc.ignore, f) {
				continue
			}
			if diff := cmp.Diff(want.Payload[f], got.Payload[f]); diff != "" {
				t.Errorf("result field %s (-OpenClaw +exechost):\n%s", f, diff)
			}
		}
	}
	ge, we := events[ex.name], events[oc.name]
	if len(ge) != len(we) {
		t.Fatalf("events: exechost %+v, OpenClaw %+v", ge, we)
	}
	for i := range ge {
		if ge[i].Event != we[i].Event {
			t.Errorf("event %d: exechost %s, OpenClaw %s", i, ge[i].Event, we[i].Event)
		}
		if tc.outputPrefix != "" {
			for name, out := range map[string]any{"exechost": ge[i].Payload["output"], "OpenClaw": we[i].Payload["output"]} {
				if s, _ := out.(string); !strings.HasPrefix(s, tc.outputPrefix) {
					t.Errorf("%s: %s output %.60q… does not start with %q", name, ge[i].Event, s, tc.outputPrefix)
				}
			}
		}
		for _, f := range tc.eventFields {
			if diff := cmp.Diff(we[i].Payload[f], ge[i].Payload[f]); diff != "" {
				t.Errorf("%s field %s (-OpenClaw +exechost):\n%s", ge[i].Event, f, diff)
			}
		}
	}
	return fmt.Sprintf("%s: ok=%v events=%d", tc.name, got.OK, len(ge))
}

// waitHostStats waits until node.list shows the node's hostStats.
func (h *harness) waitHostStats() map[string]any {
	h.t.Helper()
	deadline := time.Now().Add(waitNode)
	for time.Now().Before(deadline) {
		var list struct {
			Nodes []nodeInfo `json:"nodes"`
		}
		if err := h.call("node.list", map[string]any{}, &list); err != nil {
			h.t.Fatalf("node.list: %v", err)
		}
		for _, n := range list.Nodes {
			if n.NodeID == h.devID && n.HostStats != nil {
				delete(n.HostStats, "updatedAtMs")
				return n.HostStats
			}
		}
		time.Sleep(pollPeriod)
	}
	h.t.Fatalf("%s: no hostStats in node.list after %s", h.name, waitNode)
	return nil
}

// execToolTurn is what one agent turn calling the exec tool produced.
type execToolTurn struct {
	session  string
	text     string   // the tool result the model read
	commands []string // what the gateway invoked on the node for the turn
	events   []recordedEvent
	err      error
}

// compareExecTool runs one agent turn per node host whose scripted model
// calls exec with args (host node, that node), and compares the tool
// results the model read, the commands the gateway invoked and the events
// it received.
func compareExecTool(t *testing.T, model *octest.ScriptedModel, args map[string]any, ex, oc *harness, exRec, ocRec *recorder) string {
	turns := make([]execToolTurn, 2)
	var wg sync.WaitGroup
	for i, n := range []struct {
		h   *harness
		rec *recorder
	}{{ex, exRec}, {oc, ocRec}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := maps.Clone(args)
			a["host"], a["node"] = "node", n.h.devID
			msg, marker := model.Script("exec", a)
			turn := execToolTurn{session: "agent:main:exec-tool-" + uuid.NewString()[:8]}
			turn.err = n.h.agentTurn(msg, turn.session)
			if turn.err == nil {
				var ok bool
				if turn.text, ok = model.ToolResult(marker); !ok {
					turn.err = errors.New("the exec tool's result never reached the model")
				}
			}
			// The node id is the node's own; the rest must match.
			turn.text = strings.ReplaceAll(turn.text, n.h.devID, "<node id>")
			var runID string
			turn.commands, runID = n.rec.invokedFor(turn.session)
			turn.events = n.rec.forRun(runID)
			turns[i] = turn
		}()
	}
	wg.Wait()
	got, want := turns[0], turns[1]
	for name, turn := range map[string]execToolTurn{"exechost": got, "OpenClaw": want} {
		if turn.err != nil {
			t.Fatalf("%s: agent turn: %v", name, turn.err)
		}
	}
	t.Logf("exec tool result (OpenClaw's node host):\n%s", want.text)
	if diff := cmp.Diff(want.text, got.text); diff != "" {
		t.Errorf("exec tool result (-OpenClaw +exechost):\n%s", diff)
	}
	if wantCmds := []string{"system.run.prepare", "system.run"}; !slices.Equal(want.commands, wantCmds) || !slices.Equal(got.commands, wantCmds) {
		t.Errorf("invoked: exechost %v, OpenClaw %v, want %v", got.commands, want.commands, wantCmds)
	}
	if len(got.events) != len(want.events) || len(want.events) == 0 {
		t.Fatalf("events: exechost %+v, OpenClaw %+v", got.events, want.events)
	}
	for i := range got.events {
		if got.events[i].Event != want.events[i].Event {
			t.Errorf("event %d: exechost %s, OpenClaw %s", i, got.events[i].Event, want.events[i].Event)
		}
		// command and output differ on purpose (docs/openclaw.md).
		for _, f := range []string{"host", "exitCode", "timedOut", "success", "suppressNotifyOnExit"} {
			if diff := cmp.Diff(want.events[i].Payload[f], got.events[i].Payload[f]); diff != "" {
				t.Errorf("%s field %s (-OpenClaw +exechost):\n%s", got.events[i].Event, f, diff)
			}
		}
	}
	return fmt.Sprintf("%v: ok events=%d", args["command"], len(got.events))
}

// agentTurn runs one agent turn in session with message and waits for it
// to end (the `agent` call answers once it is accepted).
func (h *harness) agentTurn(message, session string) error {
	var acc struct {
		RunID  string `json:"runId"`
		Status string `json:"status"`
	}
	if err := h.call("agent", map[string]any{"message": message, "sessionKey": session, "idempotencyKey": uuid.NewString(), "deliver": false}, &acc); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), agentTurnLimit)
	defer cancel()
	var done struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	if err := h.op.Call(ctx, "agent.wait", map[string]any{"runId": acc.RunID, "timeoutMs": (agentTurnLimit - 10*time.Second).Milliseconds()}, &done); err != nil {
		return fmt.Errorf("agent.wait %s: %w", acc.RunID, err)
	}
	if done.Status != "ok" {
		return fmt.Errorf("agent run %s ended %q: %s", acc.RunID, done.Status, done.Error)
	}
	return nil
}

// invokeLimit is the node.invoke timeout of a case (callLimit, the
// operator call's own bound, is longer).
const invokeLimit = 75_000

// agentTurnLimit bounds one agent turn: a hang bound, not a speed claim
// (a turn took up to 2 minutes on the loaded 2-core machine).
const agentTurnLimit = 8 * time.Minute

func keys(ms ...map[string]any) []string {
	var out []string
	for _, m := range ms {
		for k := range m {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

// approvedCase is one run with an operator's approval given in OpenClaw:
// a script x.sh with script, prepared as `sh x.sh`, approved allow-once,
// then (rewrite) rewritten and (change) the run's params changed before
// the run goes out; twice prepares and approves it twice and runs both at
// once.
type approvedCase struct {
	name            string
	script, rewrite string
	change          func(params map[string]any)
	twice           bool
	want            string // the stdout of every run; "" when refused
	errorPrefix     string // the prefix both refusals share, if any
}

// approve asks OpenClaw's gateway for an approval of plan and grants it
// allow-once, as an operator in OpenClaw's UI would; it returns the
// approval's id. No UI is connected: requireDeliveryRoute=false keeps the
// request pending for this operator.
func (h *harness) approve(plan map[string]any) string {
	h.t.Helper()
	var req struct {
		ID string `json:"id"`
	}
	if err := h.call("exec.approval.request", map[string]any{"twoPhase": true, "requireDeliveryRoute": false,
		"command": plan["commandText"], "commandArgv": plan["argv"], "systemRunPlan": plan, "host": "node", "nodeId": h.devID,
		"cwd": plan["cwd"], "agentId": "main", "sessionKey": "agent:main:main", "timeoutMs": 60000}, &req); err != nil || req.ID == "" {
		h.t.Fatalf("%s: exec.approval.request: %+v %v", h.name, req, err)
	}
	if err := h.call("exec.approval.resolve", map[string]any{"id": req.ID, "decision": "allow-once"}, nil); err != nil {
		h.t.Fatalf("%s: exec.approval.resolve: %v", h.name, err)
	}
	return req.ID
}

// compareApproved runs tc on both node hosts and compares the outcomes
// and the exec.* events.
func compareApproved(t *testing.T, tc approvedCase, tmp string, ex, oc *harness, exRec, ocRec *recorder) string {
	type outcome struct {
		runs   []invokeOutcome
		events [][]recordedEvent
	}
	got := map[string]*outcome{}
	for _, n := range []struct {
		h   *harness
		rec *recorder
	}{{ex, exRec}, {oc, ocRec}} {
		// Outside the exechost node's state directory, which its runs
		// cannot see.
		work := filepath.Join(tmp, "work", n.h.name, uuid.NewString()[:8])
		if err := os.MkdirAll(work, 0o755); err != nil {
			t.Fatal(err)
		}
		script := filepath.Join(work, "x.sh")
		if err := os.WriteFile(script, []byte(tc.script+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		count := 1
		if tc.twice {
			count = 2
		}
		var all []map[string]any
		for range count {
			prep := n.h.invoke("system.run.prepare", map[string]any{"command": []string{"sh", "x.sh"}, "cwd": work,
				"agentId": "main", "sessionKey": "agent:main:main"}, invokeLimit)
			if !prep.OK {
				t.Fatalf("%s: prepare: %s", n.h.name, prep.Message)
			}
			plan := prep.Payload["plan"].(map[string]any)
			id := n.h.approve(plan)
			params := map[string]any{"command": plan["argv"], "rawCommand": plan["commandText"], "cwd": plan["cwd"],
				"agentId": "main", "sessionKey": "agent:main:main", "systemRunPlan": plan, "runId": id, "approved": true, "approvalDecision": "allow-once"}
			if tc.change != nil {
				tc.change(params)
			}
			all = append(all, params)
		}
		if tc.rewrite != "" {
			if err := os.WriteFile(script, []byte(tc.rewrite+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		o := &outcome{runs: make([]invokeOutcome, len(all))}
		var wg sync.WaitGroup
		for i, params := range all {
			wg.Add(1)
			go func() {
				defer wg.Done()
				o.runs[i] = n.h.invoke("system.run", params, invokeLimit)
			}()
		}
		wg.Wait()
		for _, params := range all {
			o.events = append(o.events, n.rec.forRun(params["runId"].(string)))
		}
		if _, err := os.Stat(filepath.Join(work, "pwned")); err == nil {
			t.Errorf("%s: the rewritten script ran", n.h.name)
		}
		got[n.h.name] = o
	}
	e, w := got[ex.name], got[oc.name]
	for i := range w.runs {
		ge, we := e.runs[i], w.runs[i]
		if ge.OK != we.OK {
			t.Errorf("run %d ok: exechost %v (%s %v), OpenClaw %v (%s %v)", i, ge.OK, ge.Message, ge.Payload, we.OK, we.Message, we.Payload)
			continue
		}
		if tc.want != "" && (ge.Payload["stdout"] != tc.want || we.Payload["stdout"] != tc.want) {
			t.Errorf("run %d stdout: exechost %q, OpenClaw %q, want %q", i, ge.Payload["stdout"], we.Payload["stdout"], tc.want)
		}
		if !ge.OK && ge.Code != we.Code {
			t.Errorf("run %d error: exechost %q, OpenClaw %q", i, ge.Message, we.Message)
		}
		if tc.errorPrefix != "" {
			for name, m := range map[string]string{"exechost": ge.Message, "OpenClaw": we.Message} {
				if !strings.HasPrefix(m, tc.errorPrefix) {
					t.Errorf("run %d: %s error %q does not start with %q", i, name, m, tc.errorPrefix)
				}
			}
		}
		var gk, wk []string
		for _, ev := range e.events[i] {
			gk = append(gk, ev.Event+" "+fmt.Sprint(ev.Payload["reason"]))
		}
		for _, ev := range w.events[i] {
			wk = append(wk, ev.Event+" "+fmt.Sprint(ev.Payload["reason"]))
		}
		if diff := cmp.Diff(wk, gk); diff != "" {
			t.Errorf("run %d events (-OpenClaw +exechost):\n%s", i, diff)
		}
	}
	return fmt.Sprintf("%s: ok=%v", tc.name, w.runs[0].OK)
}
