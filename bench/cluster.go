//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/exechost/exechost/internal/testproc"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/client"
)

// Policies the benchmark hosts use: an allowlist holding true, sh and cat
// (for the large-output rows), so every exec goes through a real allowlist
// decision.
const (
	policyAllowTrue = `{"version":1,"defaults":{"security":"allowlist","ask":"off","askFallback":"deny"},
  "agents":{"*":{"allowlist":[{"pattern":"/bin/true"},{"pattern":"/usr/bin/true"},{"pattern":"/bin/sh"},{"pattern":"/usr/bin/sh"},{"pattern":"/bin/cat"},{"pattern":"/usr/bin/cat"}]}}}`
	policyFull = `{"version":1,"defaults":{"security":"full","ask":"off","askFallback":"deny"}}`
	// gatewayConfig defers to each host's own exec-approvals.json.
	gatewayConfig = `{
  "tools": {"exec": {"security": "full", "ask": "off"}},
  "gateway": {"listen": "127.0.0.1:0"},
  "sandbox": {"backend": "none"}
}`
)

// proc is one long-running exechost process.
type proc struct{ *testproc.Proc }

// startProc runs `exechost --state-dir dir args…` in the background.
func startProc(bin, dir string, args ...string) (*proc, error) {
	tp, err := testproc.Start(append([]string{bin, "--state-dir", dir}, args...))
	if err != nil {
		return nil, err
	}
	return &proc{tp}, nil
}

// stop ends the process (SIGTERM, then SIGKILL after 5 s) and waits.
func (p *proc) stop() { p.Stop(5 * time.Second) }

// waitFor polls cond every step until it holds or limit passes.
func waitFor(what string, limit, step time.Duration, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(step)
	}
	return nil
}

var urlRE = regexp.MustCompile(`url=(wss?://[0-9.:]+)`)

// cluster is a real gateway process with real node processes, all on
// loopback with state directories under one temporary directory.
type cluster struct {
	bin   string
	root  string
	gwDir string
	url   string
	gw    *proc
	agent *bridge.Conn // an agent client, as an AI agent's tool would hold
	oper  *bridge.Conn // an operator client for pairing and nodes.list
	nodes []*clusterNode
}

// clusterNode is one `exechost node run` process.
type clusterNode struct {
	dir, id string
	p       *proc
}

// writeFile writes data 0600, creating the directory 0700.
func writeFile(path, data string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(data), 0o600)
}

// startCluster starts a gateway in root/gateway and connects an agent and
// an operator client to it.
func startCluster(bin, root string) (*cluster, error) {
	c := &cluster{bin: bin, root: root, gwDir: filepath.Join(root, "gateway")}
	if err := writeFile(filepath.Join(c.gwDir, "exechost.json"), gatewayConfig); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(c.gwDir, "exec-approvals.json"), policyAllowTrue); err != nil {
		return nil, err
	}
	var err error
	if c.gw, err = startProc(bin, c.gwDir, "gateway", "--log-level", "info"); err != nil {
		return nil, err
	}
	if err := waitFor("the gateway to listen", 30*time.Second, 5*time.Millisecond, func() bool {
		return urlRE.MatchString(c.gw.Out.String())
	}); err != nil {
		c.close()
		return nil, fmt.Errorf("%w; output:\n%s", err, c.gw.Out)
	}
	c.url = urlRE.FindStringSubmatch(c.gw.Out.String())[1]
	if c.agent, err = c.dial(bridge.RoleAgent); err != nil {
		c.close()
		return nil, err
	}
	if c.oper, err = c.dial(bridge.RoleOperator); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// dial connects a client with the gateway token, pinning the gateway's
// key, like the CLI does.
func (c *cluster) dial(role string) (*bridge.Conn, error) {
	auth, err := client.StateDirAuth(c.gwDir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, c.url, client.Options{Role: role, Auth: auth,
		Client: bridge.ClientInfo{Name: "exechost-bench", Version: "bench", Platform: "linux"}})
	if err != nil {
		return nil, err
	}
	return cl.Conn(), nil
}

// joinKey asks the gateway for a one-time join key (what `exechost gateway
// join-key` calls).
func (c *cluster) joinKey() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var res bridge.JoinKeyResult
	if err := c.oper.Call(ctx, bridge.MethodJoinKey, bridge.JoinKeyParams{TTLMs: time.Hour.Milliseconds()}, &res); err != nil {
		return "", fmt.Errorf("join key: %w", err)
	}
	return res.Key, nil
}

// connectedIDs returns the ids nodes.list shows connected.
func (c *cluster) connectedIDs() (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var res bridge.NodesResult
	if err := c.oper.Call(ctx, bridge.MethodNodesList, struct{}{}, &res); err != nil {
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

// waitConnected polls the node list until id is connected, within limit.
func (c *cluster) waitConnected(id string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		ids, err := c.connectedIDs()
		if err == nil && ids[id] {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s not listed as connected within %s (last error: %v)", id, limit, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readNodeID reads the node id the node runner saved in node.json.
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

// addNode starts `exechost node run` with a join key and waits until the
// gateway lists it as connected; it returns the cold-start time from
// process start to registered.
func (c *cluster) addNode(name string) (*clusterNode, time.Duration, error) {
	key, err := c.joinKey()
	if err != nil {
		return nil, 0, err
	}
	n := &clusterNode{dir: filepath.Join(c.root, name)}
	if err := writeFile(filepath.Join(n.dir, "exec-approvals.json"), policyAllowTrue); err != nil {
		return nil, 0, err
	}
	// The key in a file, as a user passes it (never on the command line).
	keyFile := filepath.Join(n.dir, "join-key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		return nil, 0, err
	}
	t0 := time.Now()
	if n.p, err = startProc(c.bin, n.dir, "node", "run", "--gateway", c.url, "--display-name", name, "--join-key-file", keyFile, "--log-level", "warn"); err != nil {
		return nil, 0, err
	}
	c.nodes = append(c.nodes, n)
	err = waitFor(name+" to register", 30*time.Second, 2*time.Millisecond, func() bool {
		if n.id == "" {
			n.id = readNodeID(n.dir)
			if n.id == "" {
				return false
			}
		}
		ids, err := c.connectedIDs()
		return err == nil && ids[n.id]
	})
	d := time.Since(t0)
	if err != nil {
		return nil, 0, fmt.Errorf("%w; node output:\n%s", err, n.p.Out)
	}
	return n, d, nil
}

// exec runs one command through the gateway as the agent.
func (c *cluster) exec(ctx context.Context, p bridge.ExecParams) error {
	var res bridge.ExecResult
	if err := c.agent.Call(ctx, bridge.MethodExec, p, &res); err != nil {
		return err
	}
	if !res.Success {
		return fmt.Errorf("exec %q on %s: exit %d %s %s", p.Command, res.Host, res.ExitCode, res.Error, res.Stderr)
	}
	return nil
}

// close stops every node, then the gateway.
func (c *cluster) close() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.p.stop() }()
	}
	wg.Wait()
	for _, conn := range []*bridge.Conn{c.agent, c.oper} {
		if conn != nil {
			conn.Close("bench done")
		}
	}
	if c.gw != nil {
		c.gw.stop()
	}
}

// errSkip marks a row that cannot run here; its message says why.
var errSkip = errors.New("not available")
