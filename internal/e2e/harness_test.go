// Package e2e tests the gateway, node runner and CLI together as real
// processes on loopback: the exechost binary is built once, and every test
// starts a gateway and nodes with their own state directories.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/testproc"
)

// bin is the exechost binary under test.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "exechost-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// With EXECHOST_E2E_RACE the processes under test run with the race
	// detector; a race report makes them exit non-zero (and print it).
	bin, err = testproc.Build(dir, os.Getenv("EXECHOST_E2E_RACE") != "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Bounds of every wait in these tests. They are deadlines, not timing
// assertions: a healthy run finishes far sooner.
const (
	waitLong = 60 * time.Second
	cmdLimit = 90 * time.Second
)

// proc is a long-running exechost process (gateway or node).
type proc struct{ *testproc.Proc }

// start runs `exechost --state-dir dir args…` in the background; the
// process is stopped when the test ends.
func start(t *testing.T, dir string, args ...string) *proc {
	t.Helper()
	tp, err := testproc.Start(append([]string{bin, "--state-dir", dir}, args...))
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{tp}
	t.Cleanup(func() {
		p.kill(t)
		if strings.Contains(p.Out.String(), "WARNING: DATA RACE") {
			t.Errorf("exechost %v reported a data race:\n%s", args, p.Out)
		}
	})
	return p
}

func (p *proc) signal(sig os.Signal) { _ = p.Cmd.Process.Signal(sig) }

// kill stops the process (SIGTERM, then SIGKILL) and waits for it.
func (p *proc) kill(t *testing.T) { p.Stop(10 * time.Second) }

// wait waits for the process to exit on its own.
func (p *proc) wait(t *testing.T, what string) error {
	t.Helper()
	if !p.Wait(waitLong) {
		t.Fatalf("%s: still running after %s; output:\n%s", what, waitLong, p.Out)
	}
	return p.Err()
}

// result is one finished CLI invocation.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
}

// run runs `exechost --state-dir dir args…` to completion.
func run(t *testing.T, dir string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--state-dir", dir}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), "EXECHOST_GATEWAY_TOKEN=")
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if strings.Contains(r.stderr, "WARNING: DATA RACE") {
		t.Errorf("exechost %v reported a data race:\n%s", args, r.stderr)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("run %v: did not finish within %s", args, cmdLimit)
	}
	return r
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testproc.Poll(t, waitLong, what, cond)
}

// newStateDir returns a fresh 0700 state directory.
func newStateDir(t *testing.T, name string) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), name)
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// writeFile writes data atomically (a new inode, so caches keyed by file
// identity see the change).
func writeFile(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// Approvals files used by the tests.
const (
	policyFull      = `{"version":1,"defaults":{"security":"full","ask":"off","askFallback":"deny"}}`
	policyDeny      = `{"version":1,"defaults":{"security":"deny","ask":"off","askFallback":"deny"}}`
	policyAllowlist = `{"version":1,"defaults":{"security":"allowlist","ask":"off","askFallback":"deny"},
		"agents":{"*":{"allowlist":[{"pattern":"/usr/bin/echo"},{"pattern":"/bin/echo"},{"pattern":"/usr/bin/true"},{"pattern":"/bin/true"}]}}}`
	policyAskDeny = `{"version":1,"defaults":{"security":"allowlist","ask":"always","askFallback":"deny"}}`
	policyAskFull = `{"version":1,"defaults":{"security":"allowlist","ask":"always","askFallback":"full"}}`
	policyAskList = `{"version":1,"defaults":{"security":"allowlist","ask":"always","askFallback":"allowlist"},
		"agents":{"*":{"allowlist":[{"pattern":"/usr/bin/true"},{"pattern":"/bin/true"}]}}}`
)

// gatewayConfig asks for full/off so that the execution host's own policy
// is what decides in these tests.
const gatewayConfig = `{
	// the hosts' own exec-approvals.json decide
	"tools": {"exec": {"security": "full", "ask": "off"}},
	"gateway": {"listen": "127.0.0.1:0"},
	// host=sandbox is covered by TestSandboxRouting
	"sandbox": {"backend": "none"},
}`

var urlRE = regexp.MustCompile(`url=(wss?://[0-9.:]+)`)

// cluster is a running gateway with its nodes.
type cluster struct {
	t     *testing.T
	gwDir string
	url   string
	addr  string
	gw    *proc
	nodes map[string]*node
}

// node is a running node runner.
type node struct {
	name, dir, id string
	p             *proc
}

func newCluster(t *testing.T, config string) *cluster {
	t.Helper()
	c := &cluster{t: t, gwDir: newStateDir(t, "gateway"), nodes: map[string]*node{}}
	writeFile(t, filepath.Join(c.gwDir, "exechost.json"), config)
	writeFile(t, filepath.Join(c.gwDir, "exec-approvals.json"), policyFull)
	c.startGateway("")
	return c
}

func (c *cluster) startGateway(listen string) {
	t := c.t
	t.Helper()
	args := []string{"gateway", "--log-level", "debug"}
	if listen != "" {
		args = append(args, "--listen", listen)
	}
	c.gw = start(t, c.gwDir, args...)
	waitFor(t, "gateway to listen", func() bool { return urlRE.MatchString(c.gw.Out.String()) })
	c.url = urlRE.FindStringSubmatch(c.gw.Out.String())[1]
	c.addr = strings.TrimPrefix(c.url, "ws://")
}

// cli runs a client command against this cluster's gateway.
func (c *cluster) cli(args ...string) result {
	c.t.Helper()
	if args[0] == "exec" {
		// exec stops parsing flags at the command text.
		return run(c.t, c.gwDir, append([]string{"exec", "--gateway", c.url}, args[1:]...)...)
	}
	return run(c.t, c.gwDir, append(args, "--gateway", c.url)...)
}

// nodesList returns `nodes list --json` (or pending).
func (c *cluster) nodesList(which string) []bridge.NodeView {
	c.t.Helper()
	r := c.cli("nodes", which, "--json")
	if r.code != 0 {
		c.t.Fatalf("nodes %s: %s", which, r)
	}
	var res bridge.NodesResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		c.t.Fatalf("nodes %s --json: %v\n%s", which, err, r.stdout)
	}
	return res.Nodes
}

func (c *cluster) connected(id string) bool {
	for _, n := range c.nodesList("list") {
		if n.NodeID == id && n.Connected {
			return true
		}
	}
	return false
}

func (c *cluster) isPending(id string) bool {
	for _, n := range c.nodesList("pending") {
		if n.NodeID == id {
			return true
		}
	}
	return false
}

// startNode starts a node runner with its own state directory and policy,
// without pairing it.
func (c *cluster) startNode(name, displayName, policy string, extra ...string) *node {
	t := c.t
	t.Helper()
	n := &node{name: name, dir: newStateDir(t, name)}
	writeFile(t, filepath.Join(n.dir, "exec-approvals.json"), policy)
	args := append([]string{"node", "run", "--gateway", c.url, "--display-name", displayName, "--log-level", "debug"}, extra...)
	n.p = start(t, n.dir, args...)
	waitFor(t, name+" to write node.json", func() bool {
		id := readNodeJSON(t, n.dir)
		n.id = id.NodeID
		return n.id != ""
	})
	c.nodes[name] = n
	return n
}

// addNode starts a node and pairs it interactively (pending → approve).
func (c *cluster) addNode(name, displayName, policy string) *node {
	t := c.t
	t.Helper()
	n := c.startNode(name, displayName, policy)
	waitFor(t, name+" to be pending", func() bool { return c.isPending(n.id) })
	if r := c.cli("nodes", "approve", n.id); r.code != 0 {
		t.Fatalf("approve %s: %s", name, r)
	}
	waitFor(t, name+" to be connected", func() bool { return c.connected(n.id) })
	// The gateway lists a node before the node has read its answer; the
	// token (saved last) says the node has taken in what pairing gave it.
	waitFor(t, name+" to save its token", func() bool { return readNodeJSON(t, n.dir).Token != "" })
	return n
}

// nodeJSON is node.json as the tests read it.
type nodeJSON struct {
	Version     int    `json:"version"`
	NodeID      string `json:"nodeId"`
	Token       string `json:"token"`
	DisplayName string `json:"displayName"`
	Gateway     struct {
		URL            string `json:"url"`
		TLSFingerprint string `json:"tlsFingerprint"`
		PublicKey      string `json:"publicKey"`
	} `json:"gateway"`
}

func readNodeJSON(t *testing.T, dir string) nodeJSON {
	t.Helper()
	var n nodeJSON
	data, err := os.ReadFile(filepath.Join(dir, "node.json"))
	if err != nil {
		return n
	}
	if err := json.Unmarshal(data, &n); err != nil {
		t.Fatalf("node.json: %v", err)
	}
	return n
}

// execJSON runs `exechost exec --json` and decodes a successful result.
func (c *cluster) execJSON(args ...string) (bridge.ExecResult, result) {
	c.t.Helper()
	r := c.cli(append([]string{"exec", "--json"}, args...)...)
	var res bridge.ExecResult
	if strings.HasPrefix(strings.TrimSpace(r.stdout), "{") {
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			c.t.Fatalf("exec --json: %v\n%s", err, r)
		}
	}
	return res, r
}

// events drains a session's system events.
func (c *cluster) events(session string, agent ...string) []string {
	c.t.Helper()
	args := []string{"exec", "--events", "drain", "--json", "--session", session}
	if len(agent) > 0 {
		args = append(args, "--agent", agent[0])
	}
	r := c.cli(args...)
	if r.code != 0 {
		c.t.Fatalf("exec --events: %s", r)
	}
	var res bridge.SessionEventsResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		c.t.Fatalf("events: %v\n%s", err, r.stdout)
	}
	out := make([]string, len(res.Events))
	for i, e := range res.Events {
		out[i] = e.Text
	}
	return out
}

func hasPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decode %T: %v\n%s", v, err, s)
	}
}

// keyFile writes a join key to a 0600 file for --join-key-file (a key
// is never passed in argv).
func keyFile(t *testing.T, key string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "join-key")
	writeFile(t, f, key+"\n")
	return f
}
