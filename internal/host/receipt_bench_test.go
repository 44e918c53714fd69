package host

import (
	"context"
	"testing"

	"github.com/exechost/exechost/internal/nodekey"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/receipt"
)

// BenchmarkRunReceipt is an allowlisted run without and with its signed
// receipt (sign + write + fdatasync before Run returns), measured in one
// process so the two sub-benchmarks see the same machine:
//
//	go test -run '^$' -bench BenchmarkRunReceipt -benchtime 300x ./internal/host/
func BenchmarkRunReceipt(b *testing.B) {
	for _, withReceipt := range []bool{false, true} {
		name := "run"
		if withReceipt {
			name = "run+receipt"
		}
		b.Run(name, func(b *testing.B) {
			f := newFixture(b, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/hello")
			f.engine.OnAudit = nil
			if withReceipt {
				key, err := nodekey.Generate()
				if err != nil {
					b.Fatal(err)
				}
				l, err := receipt.Open(receipt.Options{Dir: f.engine.StateDir, Signer: key, Host: "gw"})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				f.engine.OnAudit = f.engine.receiptHook(l, func(err error) { b.Error(err) })
			}
			for b.Loop() {
				if _, err := f.engine.Run(context.Background(), Request{RawCommand: "hello", Cwd: f.dir, AgentID: "dev"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
