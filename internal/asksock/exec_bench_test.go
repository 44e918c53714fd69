package asksock

import (
	"context"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/runner"
)

// BenchmarkExecRoundTrip measures one forwarded exec over the socket (dial,
// hello, signed frame, executor, signed result, verification) with an
// executor that does no work, so the figure is the forwarding overhead.
func BenchmarkExecRoundTrip(b *testing.B) {
	for _, bc := range []struct {
		name string
		out  string
	}{
		{"small", "hi\n"},
		{"capped-output", strings.Repeat("x", runner.MaxOutput)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			res := bridge.SystemRunResult{Stdout: bc.out, Success: true}
			ts := startServer(b, func(s *Server) {
				s.Rate, s.Burst = 1e9, 1e9
				s.Exec = ExecutorFunc(func(context.Context, bridge.SystemRunParams) (bridge.SystemRunResult, error) { return res, nil })
			})
			c := &ExecClient{SocketPath: ts.Path, Token: testToken}
			b.SetBytes(int64(len(bc.out)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Exec(context.Background(), sampleExec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
