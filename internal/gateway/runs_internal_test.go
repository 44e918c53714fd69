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
