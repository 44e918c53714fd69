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
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/testdep"
)

func needABI(t *testing.T, abi int) {
	t.Helper()
	if got := confine.KernelABI(); got < abi {
		testdep.Missing(t, "landlock", "needs Landlock ABI 4 or later")
	}
}

// TestConfinementFromPolicy runs `marker PATH` (an allowlisted script that
// touches PATH) with the confinement exec-approvals.json asks for: outside
// the cwd it is refused by default, allowed once confine.writable names
// the directory; and security=full with a "confine" member is confined to
// its cwd too, while without one it writes anywhere but the state
// directory.
func TestConfinementFromPolicy(t *testing.T) {
	needABI(t, 4)
	for _, tc := range []struct {
		name    string
		sec     policy.Security
		confine *approvals.Confine
		want    bool
	}{
		{"allowlist default", policy.SecurityAllowlist, nil, false},
		{"allowlist writable", policy.SecurityAllowlist, &approvals.Confine{Writable: []string{"$EXTRA"}}, true},
		{"full default", policy.SecurityFull, nil, true},
		{"full asks for confinement", policy.SecurityFull, &approvals.Confine{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.sec, policy.AskOff, policy.FallbackDeny, "$BIN/marker")
			extra := t.TempDir()
			if tc.confine != nil {
				c := *tc.confine
				for i, w := range c.Writable {
					c.Writable[i] = strings.ReplaceAll(w, "$EXTRA", extra)
				}
				if _, err := f.store.Update(func(file *approvals.File) error { file.Defaults.Confine = &c; return nil }); err != nil {
					t.Fatal(err)
				}
			}
			target := filepath.Join(extra, "touched")
			res, err := f.engine.Run(context.Background(), Request{RawCommand: "marker " + target, Cwd: f.dir})
			if err != nil {
				t.Fatal(err)
			}
			_, statErr := os.Stat(target)
			if got := statErr == nil; got != tc.want {
				t.Errorf("wrote outside the cwd = %v, want %v (%+v)", got, tc.want, res.Result)
			}
			// The audit records say what the run could reach and which
			// layers held.
			f.mu.Lock()
			for _, r := range f.audits {
				if !strings.Contains(r.Confinement, "no access: "+f.engine.StateDir) || !strings.Contains(r.Line().Confinement, "writes: ") {
					t.Errorf("%s record's confinement %q does not say what the run could touch", r.Event, r.Confinement)
				}
				if l := r.Line().Layers; !slices.Contains(l, "landlock") || slices.Contains(l, "view") == strings.Contains(r.Confinement, "writes: anywhere") || !strings.Contains(r.Confinement, "layers: "+strings.Join(l, ", ")) {
					t.Errorf("%s record's layers %q (%q): want the jail's with landlock (Landlock alone for writes anywhere)", r.Event, r.Line().Layers, r.Confinement)
				}
			}
			f.mu.Unlock()
			// Inside the cwd a write always works.
			inside := filepath.Join(f.dir, "inside")
			if _, err := f.engine.Run(context.Background(), Request{RawCommand: "marker " + inside, Cwd: f.dir}); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(inside); err != nil {
				t.Errorf("a write in the cwd failed: %v", err)
			}
		})
	}
}

// TestConfinementUnsupportedKernel injects a kernel without Landlock: the
// jail of security=allowlist, built-in or asked for, is refused with an
// actionable error (and nothing runs) unless the policy says
// unsupported=warn, and the reach line says no layer holds.
func TestConfinementUnsupportedKernel(t *testing.T) {
	for _, tc := range []struct {
		name    string
		confine *approvals.Confine
		runs    bool
	}{
		{"built-in", nil, false},
		{"asked", &approvals.Confine{}, false},
		{"asked, warn", &approvals.Confine{Unsupported: "warn"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/marker")
			f.engine.LandlockABI = func() int { return 0 }
			if tc.confine != nil {
				if _, err := f.store.Update(func(file *approvals.File) error { file.Defaults.Confine = tc.confine; return nil }); err != nil {
					t.Fatal(err)
				}
			}
			target := filepath.Join(f.dir, "ran")
			_, err := f.engine.Run(context.Background(), Request{RawCommand: "marker " + target, Cwd: f.dir})
			_, statErr := os.Stat(target)
			if ran := statErr == nil; ran != tc.runs {
				t.Fatalf("ran = %v, want %v (err %v)", ran, tc.runs, err)
			}
			if !tc.runs && (!errors.Is(err, confine.ErrUnsupported) || !strings.Contains(err.Error(), "unsupported")) {
				t.Errorf("error %v: want confine.ErrUnsupported naming the setting that lifts it", err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, r := range f.audits {
				if slices.Contains(r.Layers, "landlock") || strings.Contains(r.Confinement, "layers: landlock") || strings.Contains(r.Confinement, ", landlock") {
					t.Errorf("%s record says layers %q held (%q) on a kernel without Landlock", r.Event, r.Layers, r.Confinement)
				}
			}
		})
	}
}

// TestConfinedPTY: a confined run on a pseudo-terminal still writes to it
// (the terminal was opened before the restriction) and sees it as a tty.
func TestConfinedPTY(t *testing.T) {
	needABI(t, 4)
	f := newFixture(t, policy.SecurityFull, policy.AskOff, policy.FallbackDeny)
	if _, err := f.store.Update(func(file *approvals.File) error { file.Defaults.Confine = &approvals.Confine{}; return nil }); err != nil {
		t.Fatal(err)
	}
	res, err := f.engine.Run(context.Background(), Request{RawCommand: "test -t 1 && echo tty-ok > /dev/tty", Cwd: f.dir, PTY: true})
	if err != nil || !strings.Contains(res.Stdout, "tty-ok") {
		t.Errorf("confined PTY run: %v %+v", err, res.Result)
	}
}

// TestConfinedBareArgv: under security=full a request's own argv runs as
// given; a bare program name is looked up in the host's PATH before the
// launcher (which searches none) starts it, and a missing one is 127.
func TestConfinedBareArgv(t *testing.T) {
	needABI(t, 4)
	f := newFixture(t, policy.SecurityFull, policy.AskOff, policy.FallbackDeny)
	t.Setenv("PATH", f.bin+":/usr/bin:/bin")
	res, err := f.engine.Run(context.Background(), Request{Argv: []string{"hello", "x y"}, Cwd: f.dir})
	if err != nil || res.Stdout != "hello x y\n" {
		t.Errorf("bare argv: %v %+v", err, res.Result)
	}
	res, _ = f.engine.Run(context.Background(), Request{Argv: []string{"no-such-program-here"}, Cwd: f.dir})
	if res.ExitCode != 127 || !strings.Contains(res.Error, "hint:") {
		t.Errorf("missing program: exit %d (%q), want 127 with a hint", res.ExitCode, res.Error)
	}
}
