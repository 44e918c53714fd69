//go:build linux

package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/state"
	"github.com/exechost/exechost/internal/testproc"
)

// policyAsk asks the node's approver for every command; without an
// approver, askFallback full decides.
const policyAsk = `{"version":1,"defaults":{"security":"allowlist","ask":"always","askFallback":"full"}}`

// outcome is one soak exec's result.
type outcome struct {
	nodeID string
	res    bridge.ExecResult
	err    error
}

// TestSoak runs execs from concurrent callers across three nodes while
// nodes are SIGKILLed and restarted and the approver one node asks is
// restarted: every call returns (a result or an error) within a bound,
// every successful run has exactly one finished record in its node's
// audit log, and no run is recorded as finished twice.
func TestSoak(t *testing.T) {
	// 4,000 execs meet a few hundred kills and restarts at this pace
	// (one each 200–600 ms); 10,000 took six minutes of CI for the same
	// assertions.
	total := 4000
	if testing.Short() {
		total = 1000
	}
	const callers = 8
	c := newCluster(t, freeAddr(t))
	oper := c.mustDial(bridge.RoleOperator)
	agent := c.mustDial(bridge.RoleAgent)
	nodes := []*node{
		c.addNode("s0", policyFull, oper),
		c.addNode("s1", policyFull, oper),
		c.addNode("asker", policyAsk, oper),
	}
	asker := nodes[2]
	approver := start(t, asker.dir, "approver", "--auto-decide", "allow-once")
	var nodeMu sync.Mutex // guards nodes[i].p and approver

	ctx, stopChaos := context.WithCancel(context.Background())
	chaosDone := make(chan struct{})
	var kills, approverRestarts atomic.Int64
	go func() {
		defer close(chaosDone)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(200+rand.IntN(400)) * time.Millisecond):
			}
			nodeMu.Lock()
			if rand.IntN(3) == 0 {
				approver.stop()
				approver = start(t, asker.dir, "approver", "--auto-decide", "allow-once")
				approverRestarts.Add(1)
			} else {
				n := nodes[rand.IntN(len(nodes))]
				n.p.kill()
				n.start(t, "")
				kills.Add(1)
			}
			nodeMu.Unlock()
		}
	}()

	var (
		next     atomic.Int64
		mu       sync.Mutex
		outcomes []outcome
		wg       sync.WaitGroup
	)
	for w := 0; w < callers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(total) {
				n := nodes[rand.IntN(len(nodes))]
				call := execAsync(agent, bridge.ExecParams{Command: "true", Host: "node", Node: n.id, SessionKey: "soak", TimeoutSec: 30})
				select {
				case <-call.done:
				case <-time.After(answerBound + 30*time.Second):
					t.Errorf("exec on %s: no answer within %s (a hang)", n.name, answerBound+30*time.Second)
					return
				}
				mu.Lock()
				outcomes = append(outcomes, outcome{n.id, call.res, call.err})
				mu.Unlock()
			}
		}()
	}
	wg.Wait() // each exec is bounded by answerBound (above)
	stopChaos()
	testproc.Recv(t, chaosDone, "the chaos goroutine's end")

	// Tally, and check each successful run against its node's audit log.
	finished := map[string]int{} // run id → finished records
	for _, n := range nodes {
		err := audit.Read(filepath.Join(n.dir, state.AuditFile), audit.Filter{}, func(r audit.Record) error {
			if r.Event == audit.EventFinished {
				finished[r.RunID]++
			}
			return nil
		})
		if err != nil {
			t.Fatalf("read %s's audit log: %v", n.name, err)
		}
	}
	var ok, failed int
	kinds := map[string]int{}
	for _, o := range outcomes {
		if o.err != nil {
			failed++
			kinds[errKind(o.err)]++
			continue
		}
		ok++
		if o.res.RunID == "" {
			t.Errorf("successful exec on %s without a run id", o.nodeID)
			continue
		}
		if got := finished[o.res.RunID]; got != 1 {
			t.Errorf("run %s on %s succeeded but has %d finished audit records, want 1", o.res.RunID, o.nodeID, got)
		}
	}
	for id, n := range finished {
		if n > 1 {
			t.Errorf("run %s finished %d times", id, n)
		}
	}
	t.Logf("%d execs (%d callers): %d succeeded, %d failed %v; %d node kills, %d approver restarts",
		len(outcomes), callers, ok, failed, kinds, kills.Load(), approverRestarts.Load())
	if len(outcomes) != total {
		t.Fatalf("%d of %d execs returned", len(outcomes), total)
	}
	if ok == 0 {
		t.Fatal("no exec succeeded during the soak")
	}
	if chaos := kills.Load() + approverRestarts.Load(); chaos < minChaos {
		t.Fatalf("only %d kills and restarts during the soak, want at least %d: it showed nothing", chaos, minChaos)
	}
}

// minChaos is the fewest kills and restarts a soak must have met.
const minChaos = 10

// errKind groups an exec error for the summary.
func errKind(err error) string {
	var be *bridge.Error
	if errors.As(err, &be) {
		msg := be.Message
		switch {
		case strings.Contains(msg, "disconnected"):
			return be.Code + ":disconnected"
		case strings.Contains(msg, "not connected"), strings.Contains(msg, "no node"):
			return be.Code + ":not-connected"
		}
		if len(msg) > 60 {
			msg = msg[:60]
		}
		return be.Code + ":" + msg
	}
	return fmt.Sprintf("%T", err)
}
