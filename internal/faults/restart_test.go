//go:build linux

package faults

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/bridge"
)

// reconnectRE finds the jittered delay a node logs before reconnecting.
var reconnectRE = regexp.MustCompile(`msg="gateway connection lost; reconnecting".* in=([0-9.]+(?:ms|s))`)

// TestGatewayRestartWithManyNodes restarts the gateway under 100 paired
// nodes: all re-register within the 10 s bound, and the delays the
// nodes chose before their first reconnect are spread by jitter rather
// than all equal (no thundering herd).
func TestGatewayRestartWithManyNodes(t *testing.T) {
	count := 100
	if testing.Short() {
		count = 20
	}
	c := newCluster(t, freeAddr(t))
	oper := c.mustDial(bridge.RoleOperator)
	nodes := make([]*node, count)
	var wg sync.WaitGroup
	keys := make([]string, count)
	for i := range keys {
		keys[i] = c.joinKey()
	}
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[i] = c.startNode(fmt.Sprintf("n%03d", i), policyFull, keys[i])
		}()
	}
	wg.Wait()
	ids := make([]string, count)
	for i, n := range nodes {
		ids[i] = n.id
	}
	c.waitConnected(oper, ids...)
	logLen := make([]int, count)
	for i, n := range nodes {
		logLen[i] = len(n.p.Out.String())
	}

	c.gw.stop()
	restart := time.Now()
	c.startGateway()
	oper = c.mustDial(bridge.RoleOperator)
	const bound = 10 * time.Second
	waitWithin(t, bound-time.Since(restart), fmt.Sprintf("all %d nodes to re-register within %s of the restart", count, bound), func() bool {
		m, err := connectedIDs(oper)
		return err == nil && len(m) >= count
	})
	t.Logf("all %d nodes re-registered %s after the gateway restart began", count, time.Since(restart).Round(time.Millisecond))

	// The first delay each node picked after losing the gateway.
	var delays []time.Duration
	for i, n := range nodes {
		out := n.p.Out.String()[logLen[i]:]
		mm := reconnectRE.FindStringSubmatch(out)
		if mm == nil {
			t.Fatalf("node %s logged no reconnect delay after the restart:\n%s", n.name, out)
		}
		d, err := time.ParseDuration(mm[1])
		if err != nil {
			t.Fatalf("node %s: delay %q: %v", n.name, mm[1], err)
		}
		delays = append(delays, d)
	}
	slices.Sort(delays)
	distinct := len(slices.Compact(slices.Clone(delays)))
	spread := delays[len(delays)-1] - delays[0]
	t.Logf("first reconnect delays: min %s, p50 %s, max %s, %d distinct of %d", delays[0], delays[len(delays)/2], delays[len(delays)-1], distinct, len(delays))
	if distinct < len(delays)/2 || spread < 20*time.Millisecond {
		t.Fatalf("reconnect delays are not jittered (%d distinct, spread %s): %s", distinct, spread, fmtDurations(delays))
	}
}

func fmtDurations(d []time.Duration) string {
	s := make([]string, len(d))
	for i, x := range d {
		s[i] = x.String()
	}
	return strings.Join(s, " ")
}
