package host

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/nodekey"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/receipt"
)

// BenchmarkRunReceipt measures what a signed receipt adds to a run. Each
// round runs the same allowlisted command on an engine without receipts
// and on one with them (interleaved, so both see the same load), and
// times the receipt hook itself (canonical encoding, Ed25519 signature,
// write and fdatasync before Run returns). It reports the p50 of each:
//
//	go test -run '^$' -bench BenchmarkRunReceipt -benchtime 100x ./internal/host/
func BenchmarkRunReceipt(b *testing.B) {
	plain := newFixture(b, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/hello")
	plain.engine.OnAudit = nil
	signed := newFixture(b, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/hello")
	key, err := nodekey.Generate()
	if err != nil {
		b.Fatal(err)
	}
	l, err := receipt.Open(receipt.Options{Dir: signed.engine.StateDir, Signer: key, Host: "gw"})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	hook := signed.engine.receiptHook(l, func(err error) { b.Error(err) })
	var hookTimes []time.Duration
	signed.engine.OnAudit = func(r AuditRecord) {
		t0 := time.Now()
		hook(r)
		if r.Event == "finished" {
			hookTimes = append(hookTimes, time.Since(t0))
		}
	}
	var runs, runsSigned []time.Duration
	for b.Loop() {
		for _, f := range []*fixture{plain, signed} {
			t0 := time.Now()
			if _, err := f.engine.Run(context.Background(), Request{RawCommand: "hello", Cwd: f.dir, AgentID: "dev"}); err != nil {
				b.Fatal(err)
			}
			if f == plain {
				runs = append(runs, time.Since(t0))
			} else {
				runsSigned = append(runsSigned, time.Since(t0))
			}
		}
	}
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds())
	}
	b.ReportMetric(p50(runs), "run-p50-µs")
	b.ReportMetric(p50(runsSigned), "run+receipt-p50-µs")
	b.ReportMetric(p50(hookTimes), "receipt-p50-µs")
}
