package gateway

import (
	"fmt"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/policy"
)

// TestKeptOutputIsBounded delivers many finished runs with large outputs
// and checks that the output the gateway keeps stays under MaxKeptOutput,
// that the newest delivered runs keep theirs, that the oldest say their
// output expired (instead of showing none), and that an undelivered
// (background) run keeps its output whatever the budget.
func TestKeptOutputIsBounded(t *testing.T) {
	g := &Gateway{runs: map[string]*run{}}
	out := strings.Repeat("x", 100<<10)
	background := &run{id: "bg", host: policy.HostNode, done: make(chan struct{})}
	g.addRun(background)
	g.finishRun(background, bridge.ExecResult{Status: bridge.ExecCompleted, RunID: "bg", SystemRunResult: bridge.SystemRunResult{Stdout: out}}, nil)
	const n = 200
	for i := range n {
		r := &run{id: fmt.Sprint(i), host: policy.HostNode, done: make(chan struct{})}
		g.addRun(r)
		g.finishRun(r, bridge.ExecResult{Status: bridge.ExecCompleted, RunID: r.id, SystemRunResult: bridge.SystemRunResult{Stdout: out, ExitCode: 3}}, nil)
		g.delivered(r)
		if g.kept.bytes > MaxKeptOutput {
			t.Fatalf("after %d runs the gateway keeps %d bytes of output, over %d", i+1, g.kept.bytes, MaxKeptOutput)
		}
	}
	newest, err := g.status(fmt.Sprint(n - 1))
	if err != nil || newest.Result == nil || newest.Result.Stdout != out {
		t.Errorf("newest run lost its output: %+v %v", newest.Result, err)
	}
	oldest, err := g.status("0")
	if err != nil || oldest.Result == nil {
		t.Fatalf("status of the oldest run: %+v %v", oldest, err)
	}
	if r := oldest.Result; r.Stdout != "" || !r.Truncated || r.Error != outputExpired || r.ExitCode != 3 {
		t.Errorf("oldest run = %+v; want its exit code kept and its output marked expired", r)
	}
	bg, err := g.status("bg")
	if err != nil || bg.Result == nil || bg.Result.Stdout != out {
		t.Errorf("a background run not yet fetched lost its output")
	}
	if len(g.kept.order) > 2*MaxRuns+1 {
		t.Errorf("kept.order grew to %d entries", len(g.kept.order))
	}
}

// TestPruneRunsOldestFinishedFirst fills the gateway past MaxRuns with runs
// finishing out of their start order and checks that it never holds more
// than MaxRuns, never forgets a run in flight, forgets finished runs in the
// order they finished, and forgets every finished run past retention
// first.
func TestPruneRunsOldestFinishedFirst(t *testing.T) {
	g := &Gateway{runs: map[string]*run{}}
	start := func(id string) *run {
		r := &run{id: id, host: policy.HostNode, done: make(chan struct{})}
		g.addRun(r)
		return r
	}
	finish := func(r *run) {
		g.finishRun(r, bridge.ExecResult{Status: bridge.ExecCompleted, RunID: r.id}, nil)
	}
	inFlight := start("in-flight")
	// Start MaxRuns-1 more runs, then finish them newest first: the run
	// started last finishes first, so it is the first to go.
	var rs []*run
	for i := range MaxRuns - 1 {
		rs = append(rs, start(fmt.Sprint("r", i)))
	}
	for i := len(rs) - 1; i >= 0; i-- {
		finish(rs[i])
	}
	for i := range 10 {
		finish(start(fmt.Sprint("new", i)))
		if len(g.runs) > MaxRuns {
			t.Fatalf("the gateway holds %d runs, over %d", len(g.runs), MaxRuns)
		}
		if g.runs[inFlight.id] != inFlight {
			t.Fatal("a run in flight was forgotten")
		}
		gone := rs[len(rs)-1-i]
		if g.runs[gone.id] != nil {
			t.Fatalf("run %s, finished %d-th, is still kept after %d new runs", gone.id, i+1, i+1)
		}
		if next := rs[len(rs)-2-i]; g.runs[next.id] != next {
			t.Fatalf("run %s was forgotten before older finished runs", next.id)
		}
	}
	// Age half of what is left past retention: one new run forgets all of
	// them, not just the one it needs room for.
	g.mu.Lock()
	old := 0
	for _, r := range g.finished.order {
		if r != nil && old < MaxRuns/2 {
			r.finished = r.finished.Add(-2 * RunRetention)
			old++
		}
	}
	g.mu.Unlock()
	before := len(g.runs)
	start("after-aging")
	if want := before - old + 1; len(g.runs) != want {
		t.Errorf("after aging %d of %d runs, one new run left %d; want %d", old, before, len(g.runs), want)
	}
	if g.runs[inFlight.id] != inFlight {
		t.Fatal("a run in flight was forgotten")
	}
}

// BenchmarkAddRunFull times what every exec pays under the gateway's lock
// once it holds MaxRuns runs: making room for its own.
func BenchmarkAddRunFull(b *testing.B) {
	g := &Gateway{runs: map[string]*run{}}
	ids := make([]string, MaxRuns+b.N)
	for i := range ids {
		ids[i] = fmt.Sprint("r", i)
	}
	for i := range MaxRuns {
		r := &run{id: ids[i], host: policy.HostNode, done: make(chan struct{})}
		g.addRun(r)
		g.finishRun(r, bridge.ExecResult{Status: bridge.ExecCompleted, RunID: r.id}, nil)
	}
	b.ResetTimer()
	for i := range b.N {
		r := &run{id: ids[MaxRuns+i], host: policy.HostNode, done: make(chan struct{})}
		g.addRun(r)
		g.finishRun(r, bridge.ExecResult{Status: bridge.ExecCompleted, RunID: r.id}, nil)
	}
}
