package gateway_test

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
)

// Benchmarks compare an exec round trip through the gateway with a direct
// spawn in the same run; read them as ratios:
//
//	go test -run XXX -bench . -benchtime 2s ./internal/gateway/
//
// p50-ns is the median of the per-operation times.

func reportP50(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "p50-ns")
}

func BenchmarkDirectSpawn(b *testing.B) {
	for _, argv := range [][]string{{"/bin/true"}, {"/bin/sh", "-c", "/bin/true"}} {
		b.Run(fmt.Sprint(len(argv)), func(b *testing.B) {
			d := make([]time.Duration, 0, b.N)
			for b.Loop() {
				t0 := time.Now()
				if err := exec.Command(argv[0], argv[1:]...).Run(); err != nil {
					b.Fatal(err)
				}
				d = append(d, time.Since(t0))
			}
			reportP50(b, d)
		})
	}
}

func benchExec(b *testing.B, c *bridge.Conn, p bridge.ExecParams) {
	d := make([]time.Duration, 0, b.N)
	ctx := context.Background()
	for b.Loop() {
		t0 := time.Now()
		var res bridge.ExecResult
		if err := c.Call(ctx, bridge.MethodExec, p, &res); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(t0))
	}
	reportP50(b, d)
}

func BenchmarkExecGateway(b *testing.B) {
	e := newEnv(b, fullConfig)
	benchExec(b, e.client(b, bridge.RoleAgent), bridge.ExecParams{Command: "/bin/true", Host: "gateway"})
}

func BenchmarkExecNode(b *testing.B) {
	e := newEnv(b, fullConfig)
	e.addNode(b, "n", policyFull)
	benchExec(b, e.client(b, bridge.RoleAgent), bridge.ExecParams{Command: "/bin/true", Host: "node"})
}

// BenchmarkThroughput runs commands from 4×GOMAXPROCS goroutines: spread
// over 4 nodes through the gateway, and as direct local spawns; compare the
// ns/op (the inverse of the rate).
func BenchmarkThroughput(b *testing.B) {
	b.Run("direct", func(b *testing.B) {
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := exec.Command("/bin/true").Run(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("4nodes", func(b *testing.B) {
		e := newEnv(b, fullConfig)
		var ids []string
		for i := range 4 {
			ids = append(ids, e.addNode(b, fmt.Sprintf("n%d", i), policyFull))
		}
		c := e.client(b, bridge.RoleAgent)
		var next atomic.Uint64
		b.ResetTimer()
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				id := ids[next.Add(1)%uint64(len(ids))]
				var res bridge.ExecResult
				if err := c.Call(ctx, bridge.MethodExec, bridge.ExecParams{Command: "/bin/true", Host: "node", Node: id}, &res); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkEngineOnly runs the same request through the host engine
// without the gateway, separating the engine's cost from the transport's.
func BenchmarkEngineOnly(b *testing.B) {
	dir := b.TempDir()
	writePolicy(b, dir, policyFull)
	eng := host.NewEngine(dir, policy.HostGateway, "gateway")
	req := host.Request{Argv: []string{"/bin/sh", "-c", "/bin/true"}, RawCommand: "/bin/true", TimeoutMs: 60_000, Security: policy.SecurityFull, Ask: policy.AskOff}
	d := make([]time.Duration, 0, b.N)
	for b.Loop() {
		t0 := time.Now()
		if _, err := eng.Run(context.Background(), req); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(t0))
	}
	reportP50(b, d)
}

// benchOverhead interleaves a direct spawn of /bin/true, a direct spawn of
// `/bin/sh -c /bin/true` (what the engine runs for command text), the same
// request through a host engine in this process, and an exec round trip,
// so all see the same machine load. It reports the p50 of each and the
// exec's p50 overhead above each baseline; overhead-vs-engine is the
// gateway's (and for host=node, the node runner's) own share.
func benchOverhead(b *testing.B, c *bridge.Conn, p bridge.ExecParams) {
	dir := b.TempDir()
	writePolicy(b, dir, policyFull)
	eng := host.NewEngine(dir, policy.HostGateway, "bench")
	req := host.Request{Argv: []string{"/bin/sh", "-c", p.Command}, RawCommand: p.Command, TimeoutMs: 60_000,
		AgentID: "main", SessionKey: "main", Security: policy.SecurityFull, Ask: policy.AskOff}
	var direct, viaSh, viaEngine, rt []time.Duration
	ctx := context.Background()
	for b.Loop() {
		t0 := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := exec.Command("/bin/sh", "-c", "/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if _, err := eng.Run(ctx, req); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		var res bridge.ExecResult
		if err := c.Call(ctx, bridge.MethodExec, p, &res); err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		direct, viaSh = append(direct, t1.Sub(t0)), append(viaSh, t2.Sub(t1))
		viaEngine, rt = append(viaEngine, t3.Sub(t2)), append(rt, t4.Sub(t3))
	}
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds())
	}
	md, ms, me, mr := med(direct), med(viaSh), med(viaEngine), med(rt)
	b.ReportMetric(md, "true-p50-ns")
	b.ReportMetric(ms, "sh-p50-ns")
	b.ReportMetric(me, "engine-p50-ns")
	b.ReportMetric(mr, "exec-p50-ns")
	b.ReportMetric(mr-md, "overhead-vs-true-ns")
	b.ReportMetric(mr-me, "overhead-vs-engine-ns")
	b.ReportMetric(mr/md, "ratio-vs-true")
}

func BenchmarkOverheadGateway(b *testing.B) {
	e := newEnv(b, fullConfig)
	benchOverhead(b, e.client(b, bridge.RoleAgent), bridge.ExecParams{Command: "/bin/true", Host: "gateway"})
}

func BenchmarkOverheadNode(b *testing.B) {
	e := newEnv(b, fullConfig)
	e.addNode(b, "n", policyFull)
	benchOverhead(b, e.client(b, bridge.RoleAgent), bridge.ExecParams{Command: "/bin/true", Host: "node"})
}

// BenchmarkRoundTrip measures the bare request/response cost of the bridge
// through the gateway (session.events on an empty session), the floor of
// every exec's transport overhead.
func BenchmarkRoundTrip(b *testing.B) {
	e := newEnv(b, fullConfig)
	c := e.client(b, bridge.RoleAgent)
	d := make([]time.Duration, 0, b.N)
	ctx := context.Background()
	for b.Loop() {
		t0 := time.Now()
		var res bridge.SessionEventsResult
		if err := c.Call(ctx, bridge.MethodSessionEvents, bridge.SessionParams{SessionKey: "bench"}, &res); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(t0))
	}
	reportP50(b, d)
}
