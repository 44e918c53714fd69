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
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/gateway"
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
		nodes[i] = &simNode{id: id, token: tok}
		recs[i] = rec{NodeID: id, DisplayName: id, TokenHash: hex.EncodeToString(sum[:]), Platform: "linux", Commands: bridge.NodeCommands, PairedAt: now}
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
	pid := c.gw.cmd.Process.Pid
	defer func() {
		var wg sync.WaitGroup
		for _, s := range sims {
			if s.conn != nil {
				wg.Add(1)
				go func() { defer wg.Done(); s.conn.Close("bench done") }()
			}
		}
		wg.Wait()
	}()

	// Baseline: one simulated node connected.
	ctx := context.Background()
	if err := sims[0].dial(ctx, c.url); err != nil {
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

	// Connect storm: every other node dials at once; a refused or failed
	// dial retries with jittered backoff, as the node runner does.
	var connected atomic.Int64
	connected.Store(1)
	var wg sync.WaitGroup
	t0 := time.Now()
	deadline := t0.Add(stormLimit)
	var lastDone atomic.Int64
	var dialErrs atomic.Int64
	var lastErr atomic.Pointer[string]
	for _, s := range sims[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			backoff := 50 * time.Millisecond
			for time.Now().Before(deadline) {
				dctx, cancel := context.WithDeadline(ctx, deadline)
				err := s.dial(dctx, c.url)
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
	storm := time.Duration(lastDone.Load())
	got := int(connected.Load())
	ids, listErr := c.connectedIDs()
	registered := len(ids)
	stormNote := fmt.Sprintf("%d goroutines dial at once (bridge.Dial, role node, paired token); %d dial errors retried", b.nodes-1, dialErrs.Load())
	if e := lastErr.Load(); e != nil {
		stormNote += "; last error: " + *e
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

	lat, err := invokeLatencies(c, sims, got, m)
	b.add(row{section: sec, what: "exec host=node with one node connected (baseline)", s: base,
		note: fmt.Sprintf("%d sequential agent exec calls → node.invoke → simulated node answers at once", m)})
	b.add(row{section: sec, what: fmt.Sprintf("exec host=node with %d connected", got), s: lat, baseline: &base, err: err,
		target: "p99 ≤ 20 ms", met: metDur(lat.pct(0.99), targetInvokeP99, err),
		note: fmt.Sprintf("%d sequential calls to random nodes among all connected", m)})
	return nil
}

func metMax(v, limit float64) string {
	if v <= limit {
		return "yes"
	}
	return "no"
}
