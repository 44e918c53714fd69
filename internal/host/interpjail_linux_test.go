package host

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/policy"
)

// TestInterpretedRunInJail: text that runs in the guarded interpreter
// (here a list of two commands) starts in the standing jail too, so what
// the interpreter starts sees the jail's view: a file in the host's /tmp
// outside the run's writable roots is not there (the jail's /tmp is its
// own). The control, without the jail (Landlock alone, which grants reads
// everywhere), reads it.
func TestInterpretedRunInJail(t *testing.T) {
	needABI(t, 4)
	secret, err := os.CreateTemp("/tmp", "exechost-interpjail-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(secret.Name()) })
	secret.WriteString("HOST-TMP-SECRET\n")
	secret.Close()
	for _, control := range []bool{false, true} {
		name := map[bool]string{false: "jailed", true: "control: Landlock alone"}[control]
		t.Run(name, func(t *testing.T) {
			j := newJailFixture(t, policy.SecurityAllowlist)
			if _, err := j.store.Update(func(f *approvals.File) error { f.AddPattern("*", "/usr/bin/cat"); return nil }); err != nil {
				t.Fatal(err)
			}
			j.engine.NoJail = control
			req := Request{RawCommand: "cat " + secret.Name() + "; cat main.go", Cwd: j.repo}
			p, err := j.engine.Prepare(req)
			if err != nil {
				t.Fatal(err)
			}
			if p.RunsAs() != RunsInterpreted {
				t.Fatalf("runs as %s, want %s: the test proves nothing", p.RunsAs(), RunsInterpreted)
			}
			res, err := j.engine.Run(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			read := strings.Contains(res.Stdout, "HOST-TMP-SECRET")
			if read != control {
				t.Errorf("read the host's /tmp file = %v, want %v (%+v)", read, control, res.Result)
			}
			if jailed := slices.Contains(res.Layers, confine.LayerView); jailed == control {
				t.Errorf("layers %v: jailed = %v, want %v", res.Layers, jailed, !control)
			}
		})
	}
}
