package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/jail"
	"github.com/exechost/exechost/internal/policy"
)

// TestJailKeepsPersistencePaths runs an allowlisted cp for real through the engine
// under security=allowlist with only cp allowed, once with the home as
// the cwd (a writable root that is the home: ~/.zshrc does not exist and
// must not be created, ~/.bashrc must not change) and once in a
// repository (.git/hooks/pre-commit must not appear). The control starts
// the same runs unconfined (NoJail, no Landlock): every write lands, so
// the jail is what keeps them out; and an ordinary write beneath the cwd
// works in both. (With the home as a writable root, Landlock grants
// writes beneath its entries but no new entry in the home itself: that is
// how a missing ~/.zshrc stays uncreatable.)
func TestJailKeepsPersistencePaths(t *testing.T) {
	needABI(t, 4)
	for _, control := range []bool{false, true} {
		name := map[bool]string{false: "jailed", true: "control: unconfined"}[control]
		t.Run(name, func(t *testing.T) {
			j := newJailFixture(t, policy.SecurityAllowlist)
			if _, err := j.store.Update(func(f *approvals.File) error { f.AddPattern("*", "/usr/bin/cp"); return nil }); err != nil {
				t.Fatal(err)
			}
			j.engine.NoJail, j.engine.noConfine = control, control
			zshrc, bashrc := filepath.Join(j.home, ".zshrc"), filepath.Join(j.home, ".bashrc")
			hook := filepath.Join(j.repo, ".git", "hooks", "pre-commit")
			before, _ := os.ReadFile(bashrc)
			for _, d := range []string{j.home, j.repo} {
				if err := os.WriteFile(filepath.Join(d, "payload"), []byte("pwned\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			runs := []struct{ cwd, dst string }{
				{j.home, ".zshrc"}, {j.home, ".bashrc"}, {j.repo, ".git/hooks/pre-commit"},
				{j.home, "docs/planted-ok"}, {j.repo, "planted-ok"},
			}
			for _, r := range runs {
				cwd := r.cwd
				req := Request{RawCommand: "cp payload " + r.dst, Cwd: cwd}
				res, err := j.engine.Run(context.Background(), req)
				if err != nil {
					t.Fatalf("cwd %s: %v", cwd, err)
				}
				if !control && !slices.Contains(res.Layers, confine.LayerView) {
					p, _ := j.engine.Prepare(req)
					t.Fatalf("cwd %s: the run was not held by the jail's view (layers %v, runs as %s): %+v", cwd, res.Layers, p.RunsAs(), res.Result)
				}
				if _, err := os.Stat(filepath.Join(cwd, r.dst)); strings.HasSuffix(r.dst, "planted-ok") && err != nil {
					t.Errorf("cwd %s: the ordinary write in the cwd failed: %v (%+v)", cwd, err, res.Result)
				}
			}
			_, zErr := os.Stat(zshrc)
			after, _ := os.ReadFile(bashrc)
			_, hErr := os.Stat(hook)
			for what, wrote := range map[string]bool{"created ~/.zshrc": zErr == nil, "appended to ~/.bashrc": string(after) != string(before), "created .git/hooks/pre-commit": hErr == nil} {
				if wrote != control {
					t.Errorf("%s = %v, want %v", what, wrote, control)
				}
			}
		})
	}
}

// TestMissingLayerFailsClosed builds the jail without its pid layer (the
// engine's JailLayers option: as a kernel without pid namespaces would)
// and runs an allowlisted `marker FILE` for real: under security=allowlist
// (unsupported: deny) the run is refused with confine.ErrUnsupported and
// nothing ran; the control, the same policy with unsupported: warn, runs
// it with the layers that held, and the run's result, its finished audit
// record and the reach line name exactly those (no pid).
func TestMissingLayerFailsClosed(t *testing.T) {
	needABI(t, 4)
	for _, warn := range []bool{false, true} {
		name := map[bool]string{false: "deny", true: "control: unsupported warn"}[warn]
		t.Run(name, func(t *testing.T) {
			j := newJailFixture(t, policy.SecurityAllowlist)
			if warn {
				j.setConfine(t, &approvals.Confine{Unsupported: string(confine.UnsupportedWarn)})
			}
			j.engine.JailLayers = slices.DeleteFunc(slices.Clone(jail.AllLayers), func(l confine.Layer) bool { return l == confine.LayerPID })
			target := filepath.Join(j.repo, "ran")
			req := Request{RawCommand: "marker " + target, Cwd: j.repo}
			p, err := j.engine.Prepare(req)
			if err != nil {
				t.Fatal(err)
			}
			text := j.engine.ConfinementText(p)
			res, err := j.engine.Run(context.Background(), req)
			_, statErr := os.Stat(target)
			ran := statErr == nil
			if !warn {
				if !errors.Is(err, confine.ErrUnsupported) || !strings.Contains(err.Error(), "pid") || !strings.Contains(err.Error(), "hint:") {
					t.Errorf("run with the pid layer missing: err %v, want confine.ErrUnsupported naming pid, with a hint", err)
				}
				if ran {
					t.Error("the refused run ran")
				}
				if !strings.Contains(text, "refused on this host") || !strings.Contains(text, "pid") {
					t.Errorf("reach line %q does not say the run is refused for pid", text)
				}
				return
			}
			if err != nil || !ran {
				t.Fatalf("with unsupported: warn: err %v, ran %v (%+v)", err, ran, res.Result)
			}
			var held []string
			for _, l := range res.Layers {
				held = append(held, string(l))
			}
			if slices.Contains(held, string(confine.LayerPID)) || !slices.Contains(held, string(confine.LayerView)) {
				t.Errorf("the run's layers %v: want the view and no pid", held)
			}
			j.mu.Lock()
			var fin *AuditRecord
			for i := range j.audits {
				if j.audits[i].Event == "finished" {
					fin = &j.audits[i]
				}
			}
			j.mu.Unlock()
			if fin == nil || !slices.Equal(fin.Layers, held) {
				t.Errorf("finished audit record's layers %v, want the run's %v", fin, held)
			}
			if !strings.Contains(text, "layers: "+strings.Join(held, ", ")) || !strings.Contains(text, "lacks pid") {
				t.Errorf("reach line %q: want the layers that hold (%v) and the missing pid", text, held)
			}
		})
	}
}
