//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exechost/exechost/internal/bridge"
)

// concurrency is how many execs are in flight in the throughput rows.
const concurrency = 16

// opsRate runs fn from concurrency goroutines for d and returns completed
// operations per second.
func opsRate(d time.Duration, fn func(worker int) error) (float64, error) {
	return opsRateN(d, concurrency, fn)
}

// opsRateN is opsRate with workers goroutines.
func opsRateN(d time.Duration, workers int, fn func(worker int) error) (float64, error) {
	var n atomic.Int64
	var firstErr atomic.Pointer[error]
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if err := fn(w); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return 0, *e
	}
	return float64(n.Load()) / time.Since(t0).Seconds(), nil
}

// throughputRows compares concurrent execs through the gateway to 1, 4 and
// 16 nodes with direct local spawns of the same programs on the same cores:
// an allowlisted `/bin/true` starts one program on the node, so those rows'
// baseline spawns /bin/true; under security=full the node runs
// `/bin/sh -c /bin/true` (two programs), so that row's baseline spawns the
// same. Each direct rate is measured before and after the gateway rows and
// averaged, to even out drift from other load.
func (b *bench) throughputRows(c *cluster) {
	sec := fmt.Sprintf("Throughput (%d concurrent execs of `/bin/true`)", concurrency)
	d := time.Duration(b.iters(6, 2)) * time.Second
	direct := func(argv ...string) (float64, error) {
		return opsRate(d, func(int) error { return spawn(argv...)() })
	}
	one, sh := []string{"/bin/true"}, []string{"/bin/sh", "-c", "/bin/true"}
	oneBefore, err := direct(one...)
	if err != nil {
		b.add(row{section: sec, what: "direct local spawn (baseline)", err: err})
		return
	}
	shBefore, shErr := direct(sh...)
	type res struct {
		nodes int
		rate  float64
		err   error
	}
	var results []res
	for _, k := range []int{1, 4, 16} {
		if k > len(c.nodes) {
			continue
		}
		ctx := context.Background()
		r, err := opsRate(d, func(w int) error {
			n := c.nodes[w%k]
			return c.exec(ctx, bridge.ExecParams{Command: "/bin/true", Host: "node", Node: n.id, SessionKey: "tp"})
		})
		results = append(results, res{k, r, err})
	}
	// The same single node with security=full. Nothing is vouched for, so
	// the text goes to /bin/sh -c as written (docs/policy.md, "shell
	// text"): each exec starts a shell that then starts /bin/true, where
	// the allowlisted row starts /bin/true directly.
	full := res{nodes: 1}
	n0 := c.nodes[0]
	if full.err = replaceFile(filepath.Join(n0.dir, "exec-approvals.json"), policyFull); full.err == nil {
		full.rate, full.err = opsRate(d, func(int) error {
			return c.exec(context.Background(), bridge.ExecParams{Command: "/bin/true", Host: "node", Node: n0.id, SessionKey: "tp"})
		})
		_ = replaceFile(filepath.Join(n0.dir, "exec-approvals.json"), policyAllowTrue)
	}
	shAfter, err := direct(sh...)
	if err != nil {
		shAfter = shBefore
	}
	oneAfter, err := direct(one...)
	if err != nil {
		oneAfter = oneBefore
	}
	how := func(before, after float64) string {
		return fmt.Sprintf("%d goroutines × os/exec; mean of before (%.0f/s) and after (%.0f/s) the gateway rows", concurrency, before, after)
	}
	base := sample{name: "direct", value: (oneBefore + oneAfter) / 2, unit: "execs/s", better: +1}
	b.add(row{section: sec, what: "direct local spawn of /bin/true (baseline)", s: base, note: how(oneBefore, oneAfter)})
	for _, r := range results {
		s := sample{value: r.rate, unit: "execs/s", better: +1}
		b.add(row{section: sec, what: fmt.Sprintf("gateway → %d node(s)", r.nodes), s: s, baseline: &base, err: r.err,
			note: fmt.Sprintf("%d agent calls in flight on one bridge.Conn, spread over %d `exechost node run` process(es) on the same cores; node policy allowlist, so /bin/true is started directly (one program, as in the baseline)", concurrency, r.nodes)})
	}
	shBase := sample{name: "direct sh", value: (shBefore + shAfter) / 2, unit: "execs/s", better: +1}
	b.add(row{section: sec, what: "direct local spawn of /bin/sh -c /bin/true (baseline)", s: shBase, err: shErr, note: how(shBefore, shAfter)})
	b.add(row{section: sec, what: "gateway → 1 node, node policy security=full", s: sample{value: full.rate, unit: "execs/s", better: +1}, baseline: &shBase, err: errors.Join(full.err, shErr),
		note: "as the 1-node row, but nothing is vouched for, so the text runs as /bin/sh -c /bin/true (two program starts, the shell and then /bin/true, as in its baseline) and no allowlist entry is stamped"})
}

// replaceFile writes data to path through a rename, so caches keyed by
// file identity see the change.
func replaceFile(path, data string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
