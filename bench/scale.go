//go:build linux

package main

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/exechost/exechost/internal/testproc"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/gateway"
	"github.com/exechost/exechost/internal/nodekey"
)

// Scale targets from the gateway issue.
const (
	targetRSSPerNodeKB = 50
	targetInvokeP99    = 20 * time.Millisecond
	stormLimit         = 2 * time.Minute
)

// simNode is a light node client: the real bridge protocol (connect as
// role node with a paired token, keepalive pings, node.invoke.request →
// node.invoke.result), answering system.run at once without spawning.
type simNode struct {
	id, token string
	key       *nodekey.Key // proves the node's identity on connect
	conn      *bridge.Conn
}

// okRun is the system.run payload a simulated node answers with.
var okRun = json.RawMessage(`{"exitCode":0,"timedOut":false,"success":true,"stdout":"","stderr":"","truncated":false}`)

func (s *simNode) dial(ctx context.Context, url string) error {
	var self atomic.Pointer[bridge.Conn]
	conn, _, err := bridge.Dial(ctx, url, bridge.ConnectParams{
		Role:   bridge.RoleNode,
		Auth:   bridge.Auth{Token: s.token},
		Client: bridge.ClientInfo{Name: "exechost-bench-sim", Version: "bench", Platform: "linux"},
		Node:   &bridge.NodeInfo{NodeID: s.id, DisplayName: s.id, Commands: bridge.NodeCommands},
	}, nil, bridge.Options{
		Device: s.key,
		OnEvent: func(event string, payload json.RawMessage) {
			if event != bridge.EventInvokeRequest {
				return
			}
			var req bridge.InvokeRequest
			if json.Unmarshal(payload, &req) != nil {
				return
			}
			go func() {
				c := self.Load()
				if c == nil {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = c.Call(ctx, bridge.MethodInvokeResult, bridge.InvokeResult{ID: req.ID, NodeID: s.id, OK: true, Payload: okRun}, nil)
			}()
		},
	})
	if err != nil {
		return err
	}
	self.Store(conn)
	s.conn = conn
	return nil
}

// seedRegistry writes a nodes.json pairing n simulated nodes (token hashes
// only, the registry's own format) and returns the nodes with their
// tokens. Pairing 10,000 nodes one join key at a time would rewrite the
// registry 10,000 times, which measures nothing the rows are about.
func seedRegistry(gwDir string, n int) ([]*simNode, error) {
	type rec struct {
		NodeID      string   `json:"nodeId"`
		DisplayName string   `json:"displayName"`
		TokenHash   string   `json:"tokenHash"`
		PublicKey   string   `json:"publicKey"`
		Platform    string   `json:"platform"`
		Commands    []string `json:"commands"`
		PairedAt    int64    `json:"pairedAt"`
	}
	nodes := make([]*simNode, n)
	recs := make([]rec, n)
	now := time.Now().UnixMilli()
	for i := range nodes {
		var b [32]byte
		_, _ = crand.Read(b[:])
		tok := "ehn_" + base64.RawURLEncoding.EncodeToString(b[:])
		sum := sha256.Sum256([]byte(tok))
		id := fmt.Sprintf("sim-%05d", i)
		key, err := nodekey.Generate()
		if err != nil {
			return nil, err
		}
		nodes[i] = &simNode{id: id, token: tok, key: key}
		recs[i] = rec{NodeID: id, DisplayName: id, TokenHash: hex.EncodeToString(sum[:]), PublicKey: key.PublicKeyString(), Platform: "linux", Commands: bridge.NodeCommands, PairedAt: now}
	}
	data, err := json.Marshal(map[string]any{"version": 1, "nodes": recs})
	if err != nil {
		return nil, err
	}
	return nodes, writeFile(filepath.Join(gwDir, gateway.RegistryFile), string(data))
}

// rssKB reads a process's resident set size from /proc.
func rssKB(pid int) (int64, error) { return procStatusKB(pid, "VmRSS:") }

// procStatusKB reads one "Name: N kB" field of /proc/<pid>/status.
func procStatusKB(pid int, field string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// invokeLatencies runs m sequential exec host=node calls to random
// simulated nodes among the first k.
func invokeLatencies(c *cluster, nodes []*simNode, k, m int) (sample, error) {
	ctx := context.Background()
	return measure("invoke", 10, m, func() error {
		n := nodes[rand.IntN(k)]
		return c.exec(ctx, bridge.ExecParams{Command: "/bin/true", Host: "node", Node: n.id, SessionKey: "scale"})
	})
}

// scaleRows connects N simulated nodes to one real gateway process at
// once and measures the storm, the gateway's RSS per node and exec
// round trips while all are connected.
func (b *bench) scaleRows() error {
	sec := fmt.Sprintf("Scale (%d simulated nodes, one `exechost gateway` process)", b.nodes)
	root := filepath.Join(b.tmp, "scale")
	gwDir := filepath.Join(root, "gateway")
	if err := writeFile(filepath.Join(gwDir, "exechost.json"), gatewayConfig); err != nil {
		return err
	}
	sims, err := seedRegistry(gwDir, b.nodes)
	if err != nil {
		return err
	}
	c, err := startCluster(b.bin, root)
	if err != nil {
		return err
	}
	defer c.close()
	pid := c.gw.Cmd.Process.Pid
	defer closeSims(sims)

	// Baseline: one simulated node connected.
	ctx := context.Background()
	if err := sims[0].dial(ctx, c.url); err != nil {
		return fmt.Errorf("first simulated node: %w", err)
	}
	// The gateway lists a node before it answers its connect, so this
	// returns at once; it stays as a check (untimed) that it does.
	if err := c.waitConnected(sims[0].id, 30*time.Second); err != nil {
		return fmt.Errorf("first simulated node: %w", err)
	}
	m := b.iters(1000, 300)
	base, err := invokeLatencies(c, sims, 1, m)
	if err != nil {
		return fmt.Errorf("invoke with one node: %w", err)
	}
	time.Sleep(time.Second)
	rss0, err := rssKB(pid)
	if err != nil {
		return err
	}

	st := storm(c.url, sims[1:])
	got := st.connected + 1
	storm, dialErrs := st.last, st.dialErrs
	ids, listErr := c.connectedIDs()
	registered := len(ids)
	stormNote := fmt.Sprintf("%d goroutines dial (bridge.Dial, role node, paired token), at most %d handshakes in flight (the gateway's bound per source; loopback is one); %d dial errors retried", b.nodes-1, gateway.MaxHandshakesPerSource, dialErrs)
	if st.lastErr != "" {
		stormNote += "; last error: " + st.lastErr
	}
	var stormErr error
	if got < b.nodes {
		stormErr = fmt.Errorf("only %d of %d nodes connected within %s", got, b.nodes, stormLimit)
	}
	b.add(row{section: sec, what: fmt.Sprintf("connect storm: time to all %d connected", b.nodes), s: sample{durs: []time.Duration{storm}}, err: stormErr, note: stormNote})
	regNote := fmt.Sprintf("nodes.list reports %d connected", registered)
	if listErr != nil {
		regNote = "nodes.list failed: " + listErr.Error()
	}
	b.notes = append(b.notes, fmt.Sprintf("Scale: %d of %d simulated nodes connected; %s.", got, b.nodes, regNote))

	time.Sleep(2 * time.Second)
	rss1, err := rssKB(pid)
	if err != nil {
		return err
	}
	perNode := float64(rss1-rss0) / float64(max(got-1, 1))
	b.add(row{section: sec, what: "gateway RSS per connected node", s: sample{value: perNode, unit: "KB/node"},
		target: fmt.Sprintf("≤ %d KB", targetRSSPerNodeKB), met: metMax(perNode, targetRSSPerNodeKB),
		note: fmt.Sprintf("(VmRSS %d KB after − %d KB with one node) / %d nodes, 2 s after the storm", rss1, rss0, got-1)})

	// The storm connects nodes in no order: call only the ones the
	// gateway lists as connected.
	var live []*simNode
	for _, s := range sims {
		if ids[s.id] {
			live = append(live, s)
		}
	}
	var lat sample
	if len(live) > 0 {
		lat, err = invokeLatencies(c, live, len(live), m)
	} else {
		err = fmt.Errorf("no node listed as connected (%v)", listErr)
	}
	b.add(row{section: sec, what: "exec host=node with one node connected (baseline)", s: base,
		note: fmt.Sprintf("%d sequential agent exec calls → node.invoke → simulated node answers at once", m)})
	b.add(row{section: sec, what: fmt.Sprintf("exec host=node with %d connected", len(live)), s: lat, baseline: &base, err: err,
		target: "p99 ≤ 20 ms", met: metDur(lat.pct(0.99), targetInvokeP99, err),
		note: fmt.Sprintf("%d sequential calls to random nodes among all the gateway lists as connected", m)})
	if err == nil && (lat.pct(0.99) > targetInvokeP99 || b.alwaysProfile) {
		closeSims(sims)
		c.close()
		b.profileScale(root, sims)
	}
	return nil
}

// closeSims closes every simulated node's connection.
func closeSims(sims []*simNode) {
	var wg sync.WaitGroup
	for _, s := range sims {
		if s.conn != nil {
			wg.Add(1)
			go func() { defer wg.Done(); s.conn.Close("bench done"); s.conn = nil }()
		}
	}
	wg.Wait()
}

// stormResult is the outcome of a connect storm.
type stormResult struct {
	connected int
	last      time.Duration // when the last node connected
	dialErrs  int64
	lastErr   string
}

// storm starts every node at once; a refused or failed dial retries with
// jittered backoff, as the node runner does, until stormLimit. At most
// gateway.MaxHandshakesPerSource handshakes are in flight: the gateway
// bounds them per source, and every simulated node comes from loopback,
// which is one source (nodes spread over many addresses are not held to
// it together).
func storm(url string, sims []*simNode) stormResult {
	var (
		connected, lastDone, dialErrs atomic.Int64
		lastErr                       atomic.Pointer[string]
		wg                            sync.WaitGroup
	)
	t0 := time.Now()
	deadline := t0.Add(stormLimit)
	inFlight := make(chan struct{}, gateway.MaxHandshakesPerSource)
	for _, s := range sims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			backoff := 50 * time.Millisecond
			for time.Now().Before(deadline) {
				dctx, cancel := context.WithDeadline(context.Background(), deadline)
				var err error
				select {
				case inFlight <- struct{}{}:
					err = s.dial(dctx, url)
					<-inFlight
				case <-dctx.Done():
					err = dctx.Err()
				}
				cancel()
				if err == nil {
					connected.Add(1)
					lastDone.Store(int64(time.Since(t0)))
					return
				}
				dialErrs.Add(1)
				msg := err.Error()
				lastErr.Store(&msg)
				time.Sleep(backoff/2 + rand.N(backoff))
				backoff = min(backoff*2, 2*time.Second)
			}
		}()
	}
	wg.Wait()
	r := stormResult{connected: int(connected.Load()), last: time.Duration(lastDone.Load()), dialErrs: dialErrs.Load()}
	if e := lastErr.Load(); e != nil {
		r.lastErr = *e
	}
	return r
}

// profileScale repeats the scale setup with the gateway package running
// in a re-executed bench helper that records a CPU profile while the exec
// calls run (`exechost gateway` has no profiling endpoint), and adds the
// top of the profile to the report.
func (b *bench) profileScale(root string, sims []*simNode) {
	note := func(err error) { b.notes = append(b.notes, "scale profile: "+err.Error()) }
	exe, err := os.Executable()
	if err != nil {
		note(err)
		return
	}
	gwDir := filepath.Join(root, "gateway")
	prof := filepath.Join(root, "gateway-cpu.pprof")
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), helperEnv+"=gateway", "EXECHOST_BENCH_STATE="+gwDir, "EXECHOST_BENCH_PROFILE="+prof)
	tp, err := testproc.StartCmd(cmd)
	if err != nil {
		note(err)
		return
	}
	p := &proc{tp}
	defer p.stop()
	if err := waitFor("the profiled gateway", 30*time.Second, 5*time.Millisecond, func() bool { return urlRE.MatchString(p.Out.String()) }); err != nil {
		note(err)
		return
	}
	c := &cluster{gwDir: gwDir, url: urlRE.FindStringSubmatch(p.Out.String())[1]}
	if c.agent, err = c.dial(bridge.RoleAgent); err != nil {
		note(err)
		return
	}
	defer c.agent.Close("bench done")
	st := storm(c.url, sims)
	defer closeSims(sims)
	_ = p.Cmd.Process.Signal(syscall.SIGUSR1)
	m := b.iters(1000, 300)
	lat, err := invokeLatencies(c, sims, st.connected, m)
	_ = p.Cmd.Process.Signal(syscall.SIGUSR2)
	if err != nil {
		note(err)
		return
	}
	if err := waitFor("the CPU profile", 30*time.Second, 20*time.Millisecond, func() bool { return strings.Contains(p.Out.String(), "profile written") }); err != nil {
		note(err)
		return
	}
	out, err := exec.Command("go", "tool", "pprof", "-top", "-cum", "-nodecount=35", prof).CombinedOutput()
	if err != nil {
		note(fmt.Errorf("go tool pprof: %w: %s", err, out))
		return
	}
	b.profile += fmt.Sprintf("# gateway CPU while %d nodes are connected and %d exec host=node calls run (p50 %s, p99 %s in this pass)\n# go tool pprof -top -cum -nodecount=35\n%s\n\n",
		st.connected, m, fmtDur(lat.pct(0.5)), fmtDur(lat.pct(0.99)), trimPprofHeader(string(out)))
}

func metMax(v, limit float64) string {
	if v <= limit {
		return "yes"
	}
	return "no"
}
