package mcpserver_test

import (
	"bytes"
	"context"
	"fmt"
	"github.com/exechost/exechost/internal/testproc"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/exechost/exechost/internal/reexec"
	"github.com/exechost/exechost/internal/testdep"
)

// These tests run the real thing: the exechost binary is built once, a
// gateway and a node run as processes on loopback with their own state
// directories, and `exechost mcp` is spawned by the SDK's own client over
// stdio (CommandTransport).

// bin is the exechost binary under test, built on first use.
var (
	binOnce sync.Once
	bin     string
	binErr  error
	binDir  string
)

func TestMain(m *testing.M) {
	if reexec.Init() {
		return
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func exechostBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "exechost-mcp-"); binErr != nil {
			return
		}
		bin = filepath.Join(binDir, "exechost")
		build := exec.Command("go", "build", "-o", bin, "github.com/exechost/exechost/cmd/exechost")
		var out bytes.Buffer
		build.Stdout, build.Stderr = &out, &out
		if err := build.Run(); err != nil {
			binErr = fmt.Errorf("build exechost: %v\n%s", err, out.String())
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return bin
}

// waitLong bounds every wait. It is a deadline, not a timing assertion: a
// healthy run finishes far sooner.
const waitLong = 60 * time.Second

// proc is a background exechost process.
type proc struct{ *testproc.Proc }

// testEnv is the environment of every spawned process: no ambient token or
// agent settings leak in from the developer's shell.
func testEnv(extra ...string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "EXECHOST_") || strings.HasPrefix(kv, "OPENCLAW_STATE_DIR=")
	})
	return append(env, extra...)
}

func start(t *testing.T, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(exechostBinary(t), args...)
	cmd.Env = testEnv()
	tp, err := testproc.StartCmd(cmd)
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{tp}
	t.Cleanup(func() { p.stop(syscall.SIGTERM) })
	return p
}

// stop signals the process and waits for it to exit (SIGKILL after a
// grace period).
func (p *proc) stop(sig syscall.Signal) {
	if sig != syscall.SIGTERM {
		p.Signal(sig)
	}
	p.Stop(10 * time.Second)
}

// waitFor polls cond until it holds or waitLong passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testproc.Poll(t, waitLong, what, cond)
}

func stateDir(t *testing.T, name string) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), name)
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

var urlRE = regexp.MustCompile(`url=(ws://[0-9.:]+)`)

// gateway is a running `exechost gateway`.
type gateway struct {
	dir, url string
	p        *proc
}

func startGateway(t *testing.T, dir, listen string) *gateway {
	t.Helper()
	g := &gateway{dir: dir, p: start(t, "--state-dir", dir, "gateway", "--listen", listen)}
	waitFor(t, "the gateway to listen", func() bool {
		select {
		case <-g.p.Done():
			t.Fatalf("gateway exited:\n%s", g.p.Out)
		default:
		}
		return urlRE.MatchString(g.p.Out.String())
	})
	g.url = urlRE.FindStringSubmatch(g.p.Out.String())[1]
	return g
}

// run runs a short exechost command and returns its stdout.
func run(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cmd := exec.CommandContext(ctx, exechostBinary(t), args...)
	cmd.Env = testEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("exechost %v: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

// allowlistPolicy is a node's exec-approvals.json allowing echo and sleep
// (by every path they may resolve to here) and nothing else, never asking.
func allowlistPolicy(t *testing.T) string {
	t.Helper()
	var pats []string
	for _, name := range []string{"echo", "sleep"} {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Fatalf("look up %s: %v", name, err)
		}
		pats = append(pats, fmt.Sprintf(`{"pattern":%q}`, p))
		if real, err := filepath.EvalSymlinks(p); err == nil && real != p {
			pats = append(pats, fmt.Sprintf(`{"pattern":%q}`, real))
		}
		for _, dir := range []string{"/bin/", "/usr/bin/"} {
			pats = append(pats, fmt.Sprintf(`{"pattern":%q}`, dir+name))
		}
	}
	return `{"version":1,"defaults":{"security":"allowlist","ask":"off","askFallback":"deny"},
		"agents":{"*":{"allowlist":[` + strings.Join(pats, ",") + `]}}}`
}

// gatewayConfig sends every exec to a node and lets the node's own
// exec-approvals.json decide.
const gatewayConfig = `{"tools":{"exec":{"host":"node","security":"full","ask":"off"}}}`

// mcpClient spawns `exechost mcp` and connects the SDK's client to it.
func mcpClient(t *testing.T, env []string, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(exechostBinary(t), append([]string{"mcp"}, args...)...)
	cmd.Env = testEnv(env...)
	stderr := &testproc.Buffer{}
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "exechost-test", Version: "v0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to exechost mcp: %v\nstderr:\n%s", err, stderr)
	}
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() {
			t.Logf("exechost mcp stderr:\n%s", stderr)
		}
	})
	return cs
}

// callTool calls a tool and returns its text and IsError, or the protocol
// error that ended the call.
func callTool(cs *mcp.ClientSession, tool string, args map[string]any) (string, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLong)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", false, fmt.Errorf("call %s %v: protocol error %w", tool, args, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			return "", false, fmt.Errorf("call %s: content %T, want text", tool, c)
		}
		b.WriteString(tc.Text)
	}
	return b.String(), res.IsError, nil
}

// call is callTool on the test goroutine: a protocol error fails the test,
// since every outcome must be a tool result.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (string, bool) {
	t.Helper()
	text, isErr, err := callTool(cs, tool, args)
	if err != nil {
		t.Fatal(err)
	}
	return text, isErr
}

// mustContain fails unless every want occurs in got.
func mustContain(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Fatalf("%s: missing %q in:\n%s", what, w, got)
		}
	}
}

var runIDRE = regexp.MustCompile(`runId=(run-[0-9a-f-]+)`)

func TestMCPEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs exechost processes")
	}
	testdep.Binary(t, "go")
	gwDir, nodeDir := stateDir(t, "gateway"), stateDir(t, "node")
	writeFile(t, filepath.Join(gwDir, "exechost.json"), gatewayConfig)
	writeFile(t, filepath.Join(nodeDir, "exec-approvals.json"), allowlistPolicy(t))
	gw := startGateway(t, gwDir, "127.0.0.1:0")
	key := strings.TrimSpace(run(t, "--state-dir", gwDir, "gateway", "join-key", "--gateway", gw.url))
	node := start(t, "--state-dir", nodeDir, "node", "run", "--gateway", gw.url, "--join-key-file", keyFile(t, key), "--display-name", "mcp-box")

	cs := mcpClient(t, nil, "--state-dir", gwDir, "--gateway", gw.url, "--agent", "main", "--session", "mcp-test")

	t.Run("tools", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		var execTool *mcp.Tool
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
			if tool.Name == "exec" {
				execTool = tool
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"exec", "exec_status", "nodes"}) {
			t.Fatalf("tools = %v, want exec, exec_status, nodes", names)
		}
		schema, ok := execTool.InputSchema.(map[string]any)
		if !ok {
			t.Fatalf("exec input schema is %T", execTool.InputSchema)
		}
		props, _ := schema["properties"].(map[string]any)
		for _, p := range []string{"command", "host", "security", "ask", "node", "cwd", "env", "timeoutSec", "yieldMs"} {
			if _, ok := props[p]; !ok {
				t.Errorf("exec input schema lacks %q: %v", p, schema)
			}
		}
		if req, _ := schema["required"].([]any); len(req) != 1 || req[0] != "command" {
			t.Errorf("exec required = %v, want [command]", schema["required"])
		}
	})

	waitConnected := func(t *testing.T) {
		t.Helper()
		waitFor(t, "the node to be connected", func() bool {
			text, isErr := call(t, cs, "nodes", map[string]any{})
			return !isErr && strings.Contains(text, "mcp-box: nodeId=") && strings.Contains(text, ", connected")
		})
	}

	t.Run("nodes", func(t *testing.T) {
		waitConnected(t)
		text, isErr := call(t, cs, "nodes", map[string]any{})
		if isErr {
			t.Fatalf("nodes: error result:\n%s", text)
		}
		mustContain(t, "nodes", text, "Nodes (1):", "- mcp-box: nodeId=", ", connected", "host=node")
	})

	t.Run("allowed", func(t *testing.T) {
		text, isErr := call(t, cs, "exec", map[string]any{"command": "echo hello from mcp"})
		if isErr {
			t.Fatalf("exec echo: error result:\n%s", text)
		}
		mustContain(t, "exec echo", text, "Exit code: 0 (host=node, node=", "--- stdout ---\nhello from mcp\n")
	})

	t.Run("denied then events", func(t *testing.T) {
		text, isErr := call(t, cs, "exec", map[string]any{"command": "ls /"})
		if !isErr {
			t.Fatalf("exec ls: want an error result, got:\n%s", text)
		}
		mustContain(t, "exec ls", text, "Denied: SYSTEM_RUN_DENIED: allowlist miss", "not allowlisted: ", "ls",
			"exechost approvals allowlist add", "--agent 'main'", "What to do:")
		// The denial's system event reaches the model with a later call.
		var seen string
		waitFor(t, "the denial's system event", func() bool {
			text, isErr := call(t, cs, "exec", map[string]any{"command": "echo again"})
			if isErr {
				t.Fatalf("exec echo again: error result:\n%s", text)
			}
			seen += text
			events, _, _ := strings.Cut(text, "Exit code:")
			if m := runIDRE.FindStringSubmatch(text); m == nil || strings.Contains(events, "id="+m[1]) {
				t.Fatalf("result lacks its runId or repeats its own run's events:\n%s", text)
			}
			return strings.Contains(seen, "Exec denied (node=")
		})
		mustContain(t, "events", seen, "System events:\n- ", "Exec denied (node=", "allowlist")
	})

	t.Run("background", func(t *testing.T) {
		text, isErr := call(t, cs, "exec", map[string]any{"command": "echo start; sleep 3; echo end", "yieldMs": 100})
		if isErr {
			t.Fatalf("exec background: error result:\n%s", text)
		}
		mustContain(t, "exec background", text, "Still running in the background", "exec_status")
		m := runIDRE.FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("no runId in:\n%s", text)
		}
		runID := m[1]
		var last string
		waitFor(t, "the background run to complete", func() bool {
			text, isErr := call(t, cs, "exec_status", map[string]any{"runId": runID})
			if isErr {
				t.Fatalf("exec_status: error result:\n%s", text)
			}
			if !strings.Contains(text, "Run "+runID+" is still running") && !strings.Contains(text, "Run "+runID+" completed") {
				t.Fatalf("exec_status: unexpected state:\n%s", text)
			}
			last = text
			return strings.Contains(text, "completed")
		})
		mustContain(t, "exec_status", last, "Exit code: 0", "start\nend\n")

		text, isErr = call(t, cs, "exec_status", map[string]any{"runId": "run-does-not-exist"})
		if !isErr {
			t.Fatalf("exec_status of an unknown run: want an error result, got:\n%s", text)
		}
		mustContain(t, "exec_status unknown", text, "unknown run", "NOT_FOUND")
	})

	t.Run("invalid arguments are tool errors", func(t *testing.T) {
		text, isErr := call(t, cs, "exec", map[string]any{"command": "echo x", "host": "moon"})
		if !isErr {
			t.Fatalf("exec host=moon: want an error result, got:\n%s", text)
		}
		mustContain(t, "exec host=moon", text, "host")
	})

	t.Run("agent and session from the environment", func(t *testing.T) {
		cs2 := mcpClient(t, []string{"EXECHOST_AGENT=ops", "EXECHOST_SESSION=env-session"}, "--state-dir", gwDir, "--gateway", gw.url)
		text, isErr := call(t, cs2, "exec", map[string]any{"command": "ls /"})
		if !isErr {
			t.Fatalf("exec ls as ops: want an error result, got:\n%s", text)
		}
		mustContain(t, "exec ls as ops", text, "--agent 'ops'")
		// The flag wins over the environment.
		cs3 := mcpClient(t, []string{"EXECHOST_AGENT=ops"}, "--state-dir", gwDir, "--gateway", gw.url, "--agent", "flagged")
		text, _ = call(t, cs3, "exec", map[string]any{"command": "ls /"})
		mustContain(t, "exec ls as flagged", text, "--agent 'flagged'")
	})

	t.Run("bad token", func(t *testing.T) {
		cs2 := mcpClient(t, []string{"EXECHOST_GATEWAY_TOKEN=not-the-token"}, "--gateway", gw.url)
		text, isErr := call(t, cs2, "exec", map[string]any{"command": "echo hi"})
		if !isErr {
			t.Fatalf("exec with a bad token: want an error result, got:\n%s", text)
		}
		mustContain(t, "exec with a bad token", text, "gateway unreachable at "+gw.url, "invalid or missing gateway token", "EXECHOST_GATEWAY_TOKEN")
	})

	t.Run("gateway down and back", func(t *testing.T) {
		addr := strings.TrimPrefix(gw.url, "ws://")
		// A call in flight when the gateway dies ends at once with an
		// error saying its outcome is unknown.
		type answer struct {
			text  string
			isErr bool
			err   error
		}
		inflight := make(chan answer, 1)
		go func() {
			text, isErr, err := callTool(cs, "exec", map[string]any{"command": "sleep 30", "yieldMs": 60000})
			inflight <- answer{text, isErr, err}
		}()
		waitFor(t, "the node to start sleep 30", func() bool {
			data, _ := os.ReadFile(filepath.Join(nodeDir, "audit.jsonl"))
			return strings.Contains(string(data), "sleep 30")
		})
		gw.p.stop(syscall.SIGKILL)
		var a answer
		select {
		case a = <-inflight:
		case <-time.After(waitLong):
			t.Fatalf("exec in flight still waiting %s after the gateway died", waitLong)
		}
		if a.err != nil {
			t.Fatal(a.err)
		}
		if !a.isErr {
			t.Fatalf("exec in flight when the gateway died: want an error result, got:\n%s", a.text)
		}
		mustContain(t, "exec in flight", a.text, "lost the connection to the gateway at "+gw.url, "outcome is unknown")

		text, isErr := call(t, cs, "exec", map[string]any{"command": "echo down"})
		if !isErr {
			t.Fatalf("exec with the gateway down: want an error result, got:\n%s", text)
		}
		mustContain(t, "exec with the gateway down", text, "gateway unreachable at "+gw.url, "connection refused", "exechost gateway")
		text, isErr = call(t, cs, "nodes", map[string]any{})
		if !isErr {
			t.Fatalf("nodes with the gateway down: want an error result, got:\n%s", text)
		}
		mustContain(t, "nodes with the gateway down", text, "gateway unreachable at "+gw.url, "exechost gateway", "reconnects on the next call")

		startGateway(t, gwDir, addr)
		text, isErr = call(t, cs, "nodes", map[string]any{})
		if isErr {
			t.Fatalf("first call after the gateway restarted: error result:\n%s", text)
		}
		mustContain(t, "nodes after restart", text, "mcp-box: nodeId=")
		waitConnected(t)
		text, isErr = call(t, cs, "exec", map[string]any{"command": "echo back again"})
		if isErr {
			t.Fatalf("exec after restart: error result:\n%s", text)
		}
		mustContain(t, "exec after restart", text, "Exit code: 0", "back again")
	})
	if t.Failed() {
		t.Logf("node output:\n%s", node.Out)
	}
}

// keyFile writes a join key to a 0600 file for --join-key-file (a key
// is never passed in argv).
func keyFile(t *testing.T, key string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "join-key")
	if err := os.WriteFile(f, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}
