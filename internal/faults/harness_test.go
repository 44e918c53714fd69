//go:build linux

package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/client"
	"github.com/exechost/exechost/internal/testproc"
)

// bin is the exechost binary under test and editor the concurrent
// approvals editor (testdata/editor), both built once by TestMain without
// the race detector.
var bin, editor string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "exechost-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin, editor = filepath.Join(dir, "exechost"), filepath.Join(dir, "editor")
	for out, pkg := range map[string]string{bin: "github.com/exechost/exechost/cmd/exechost", editor: "./testdata/editor"} {
		build := exec.Command("go", "build", "-o", out, pkg)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", pkg+":", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Deadlines of the suite. They bound every wait so that a hang fails the
// test instead of stalling it; a healthy run ends far sooner.
const (
	waitLong = 60 * time.Second
	// answerBound is how long a caller may wait for an answer after a
	// fault: the bridge's ping interval and timeout plus margin.
	answerBound = bridge.PingInterval + bridge.PingTimeout + 15*time.Second
)

// proc is one exechost process.
type proc struct{ *testproc.Proc }

// startCmd runs argv in the background; the process is stopped when the
// test ends.
func startCmd(t testing.TB, argv ...string) *proc {
	t.Helper()
	// The fault tests cut plain ws:// links between network namespaces
	// on purpose: the clients and nodes are told to accept them.
	tp, err := testproc.Start(argv, "EXECHOST_INSECURE_PLAINTEXT=1")
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{tp}
	t.Cleanup(p.stop)
	return p
}

// start runs `exechost --state-dir dir args…`.
func start(t testing.TB, dir string, args ...string) *proc {
	t.Helper()
	return startCmd(t, append([]string{bin, "--state-dir", dir}, args...)...)
}

// kill SIGKILLs the process and waits for it.
func (p *proc) kill() { p.Kill() }

// stop ends the process (SIGTERM, then SIGKILL) and waits.
func (p *proc) stop() { p.Stop(10 * time.Second) }

// waitFor polls cond until it holds, failing the test after waitLong.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitWithin(t, waitLong, what, cond)
}

func waitWithin(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	testproc.Poll(t, limit, what, cond)
}

// writeFile writes data 0600 through a rename (a new inode).
func writeFile(t testing.TB, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// Policies and config of the suite's hosts.
const (
	policyFull    = `{"version":1,"defaults":{"security":"full","ask":"off","askFallback":"deny"}}`
	gatewayConfig = `{
  "tools": {"exec": {"security": "full", "ask": "off"}},
  "sandbox": {"backend": "none"}
}`
)

var urlRE = regexp.MustCompile(`url["=:]+(wss?://[0-9.:]+)`)

// cluster is a gateway process and its nodes, each with a state
// directory under one temporary directory.
type cluster struct {
	t      testing.TB
	root   string
	gwDir  string
	listen string
	url    string
	gw     *proc
	// wrap prefixes the gateway's command line (ip netns exec …).
	wrap []string
}

// freeAddr returns a loopback address with a port free right now, so a
// restarted gateway can listen where its nodes reconnect.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func newCluster(t testing.TB, listen string) *cluster {
	t.Helper()
	c := &cluster{t: t, root: t.TempDir(), listen: listen}
	c.gwDir = filepath.Join(c.root, "gateway")
	writeFile(t, filepath.Join(c.gwDir, "exechost.json"), gatewayConfig)
	writeFile(t, filepath.Join(c.gwDir, "exec-approvals.json"), policyFull)
	c.startGateway()
	return c
}

// startGateway (re)starts the gateway on c.listen.
func (c *cluster) startGateway() {
	c.t.Helper()
	argv := append(append([]string(nil), c.wrap...), bin, "--state-dir", c.gwDir, "gateway", "--log-level", "info", "--log-format", "json", "--listen", c.listen, "--insecure-plaintext")
	c.gw = startCmd(c.t, argv...)
	waitFor(c.t, "the gateway to listen", func() bool { return urlRE.MatchString(c.gw.Out.String()) })
	c.url = urlRE.FindStringSubmatch(c.gw.Out.String())[1]
}

// dial connects a client with the gateway token, pinning the gateway's
// key, as the CLI does.
func (c *cluster) dial(role string) (*bridge.Conn, error) {
	auth, err := client.StateDirAuth(c.gwDir)
	if err != nil {
		return nil, err
	}
	// A gateway whose handshake slots are taken (a hundred nodes coming
	// back at once, all from loopback) answers busy, which client.Dial
	// retries within its connect bound.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := client.Dial(ctx, c.url, client.Options{Role: role, Auth: auth, ConnectTimeout: time.Minute,
		Client: bridge.ClientInfo{Name: "faults", Version: "test", Platform: "linux"}})
	if err != nil {
		return nil, err
	}
	return cl.Conn(), nil
}

func (c *cluster) mustDial(role string) *bridge.Conn {
	c.t.Helper()
	conn, err := c.dial(role)
	if err != nil {
		c.t.Fatalf("dial %s: %v", role, err)
	}
	c.t.Cleanup(func() { conn.Close("test done") })
	return conn
}

// joinKey asks for a one-time join key through the real CLI.
func (c *cluster) joinKey() string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--state-dir", c.gwDir, "gateway", "join-key", "--gateway", c.url)
	cmd.Env = append(os.Environ(), "EXECHOST_GATEWAY_TOKEN=")
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("gateway join-key: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// connectedIDs returns the ids nodes.list shows connected.
func connectedIDs(conn *bridge.Conn) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var res bridge.NodesResult
	if err := conn.Call(ctx, bridge.MethodNodesList, struct{}{}, &res); err != nil {
		return nil, err
	}
	m := map[string]bool{}
	for _, n := range res.Nodes {
		if n.Connected {
			m[n.NodeID] = true
		}
	}
	return m, nil
}

// node is one `exechost node run` process.
type node struct {
	name, dir, id string
	p             *proc
	wrap          []string
	url           string
}

// addNode starts a node paired with a join key and waits until the
// gateway lists it connected.
func (c *cluster) addNode(name, policy string, oper *bridge.Conn) *node {
	c.t.Helper()
	n := c.startNode(name, policy, c.joinKey())
	c.waitConnected(oper, n.id)
	return n
}

// startNode starts a node with a join key (or its saved token when key
// is "") and waits for node.json to hold its token.
func (c *cluster) startNode(name, policy, key string) *node {
	c.t.Helper()
	n := &node{name: name, dir: filepath.Join(c.root, name), url: c.url}
	if policy != "" {
		writeFile(c.t, filepath.Join(n.dir, "exec-approvals.json"), policy)
	}
	n.start(c.t, key)
	waitFor(c.t, name+" to save its token", func() bool {
		n.id = readNodeID(n.dir)
		return n.id != ""
	})
	return n
}

func (n *node) start(t testing.TB, key string) {
	args := append(append([]string(nil), n.wrap...), bin, "--state-dir", n.dir, "node", "run", "--gateway", n.url, "--display-name", n.name, "--log-level", "info")
	if key != "" {
		f := filepath.Join(t.TempDir(), "join-key")
		if err := os.WriteFile(f, []byte(key), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--join-key-file", f)
	}
	n.p = startCmd(t, args...)
}

func (c *cluster) waitConnected(oper *bridge.Conn, ids ...string) {
	c.t.Helper()
	waitFor(c.t, fmt.Sprintf("%d node(s) to be connected", len(ids)), func() bool {
		m, err := connectedIDs(oper)
		if err != nil {
			return false
		}
		for _, id := range ids {
			if !m[id] {
				return false
			}
		}
		return true
	})
}

// readNodeID returns node.json's node id once it holds a token.
func readNodeID(dir string) string {
	var n struct {
		NodeID string `json:"nodeId"`
		Token  string `json:"token"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "node.json"))
	if err != nil || json.Unmarshal(data, &n) != nil || n.Token == "" {
		return ""
	}
	return n.NodeID
}

// call is one exec call in flight and its outcome.
type call struct {
	done chan struct{}
	res  bridge.ExecResult
	err  error
}

// execAsync starts an exec call on conn.
func execAsync(conn *bridge.Conn, p bridge.ExecParams) *call {
	c := &call{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		c.err = conn.Call(ctx, bridge.MethodExec, p, &c.res)
	}()
	return c
}

// wait returns the call's outcome, failing the test if none arrives
// within limit: a hang is the fault this suite exists to catch.
func (c *call) wait(t testing.TB, limit time.Duration, what string) (bridge.ExecResult, error) {
	t.Helper()
	select {
	case <-c.done:
		return c.res, c.err
	case <-time.After(limit):
		t.Fatalf("%s: no answer within %s", what, limit)
		return c.res, nil
	}
}

// marker is a unique token in a command line, to find its processes and
// count its runs.
type marker struct {
	id   string
	file string // every run appends one line
}

func newMarker(t testing.TB) marker {
	t.Helper()
	var b [6]byte
	f, err := os.Open("/dev/urandom")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	// The id doubles as a fractional sleep duration, so the sleep
	// process's own command line carries it.
	id := fmt.Sprintf("%d", 100000+int(b[0])<<16|int(b[1])<<8|int(b[2]))
	return marker{id: id, file: filepath.Join(t.TempDir(), "runs-"+id)}
}

// command appends a line to the marker file, then sleeps (as a child of
// sh, not in its place) for a long time.
func (m marker) command() string {
	return fmt.Sprintf("echo run >> %s; sleep 300.%s; echo after >> %s", m.file, m.id, m.file)
}

// runs counts the lines starting with "run" in the marker file.
func (m marker) runs() int {
	data, err := os.ReadFile(m.file)
	if err != nil {
		return 0
	}
	return strings.Count(string(data), "run\n")
}

// procs lists the pids whose command line mentions the marker.
func (m marker) procs() []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil || pid == self {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Contains(data, []byte("300."+m.id)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killLeftovers kills whatever processes still carry the marker, so a
// failing test does not leave them running.
func (m marker) killLeftovers() {
	for _, pid := range m.procs() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// waitGone waits up to limit for the marker's processes to disappear and
// returns the command lines of those still there.
func (m marker) waitGone(limit time.Duration) []string {
	deadline := time.Now().Add(limit)
	for {
		pids := m.procs()
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var left []string
			for _, pid := range pids {
				data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				left = append(left, fmt.Sprintf("pid %d: %s", pid, bytes.ReplaceAll(bytes.TrimRight(data, "\x00"), []byte{0}, []byte{' '})))
			}
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}
