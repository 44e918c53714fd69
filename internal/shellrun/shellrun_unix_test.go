//go:build unix

package shellrun_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/shellcmd"
	"github.com/exechost/exechost/internal/shellrun"
)

// host is a fake execution host: a PATH of stand-ins that record that they
// ran (a marker file each) and print their arguments.
type host struct {
	t          *testing.T
	bin, work  string
	path, home string
}

func newHost(t *testing.T) *host {
	t.Helper()
	root := t.TempDir()
	h := &host{t: t, bin: filepath.Join(root, "bin"), work: filepath.Join(root, "work")}
	h.path, h.home = h.bin, h.work
	for _, d := range []string{h.bin, h.work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"ok", "evil", "slow", "showenv"} {
		// Its own path, not "$0": a pinned #! script's $0 is the
		// descriptor it started by (runner.ChildFD).
		body := `echo "` + filepath.Join(h.bin, n) + ` $*"; : > "` + filepath.Join(root, "ran-") + n + `"`
		switch n {
		case "slow":
			body = `: > "` + filepath.Join(root, "ran-slow") + `"; exec /bin/sleep 30`
		case "showenv":
			body = `eval "v=\${$1-unset}"; echo "$1=$v"`
		}
		if err := os.WriteFile(filepath.Join(h.bin, n), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func (h *host) ran(name string) bool {
	_, err := os.Stat(filepath.Join(filepath.Dir(h.bin), "ran-"+name))
	return err == nil
}

// plan analyses text and returns the plan the execution host would run.
func (h *host) plan(text string) shellrun.Plan {
	h.t.Helper()
	a := shellcmd.Analyze(text, shellcmd.Env{Cwd: h.work, PATH: h.path, Home: h.home})
	if !a.Interpretable() {
		h.t.Fatalf("%q does not parse: %s", text, a.Error)
	}
	return shellrun.Plan{Text: a.Canonical, Hash: a.Hash, Enforce: true, Executables: a.Executables(), Files: runner.IDsOf(a.Executables()), PATH: h.path, Home: h.home}
}

// run starts the interpreter as the execution host does: this binary in
// interpreter mode, in the work directory.
func (h *host) run(p shellrun.Plan, env ...string) (stdout, stderr string, code int) {
	h.t.Helper()
	argv, err := shellrun.Argv(p)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = h.work
	cmd.Env = append([]string{"PATH=" + h.path, "HOME=" + h.home}, env...)
	// Its own process group, as the runner starts it: a bound kills the
	// group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		h.t.Fatalf("interpreter did not finish: %s", e.String())
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		h.t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// TestEnforcementRefusesWhatTheAnalysisDidNotAllow simulates a wrong
// analysis: the plan omits an executable the text runs. The interpreter
// must refuse it at run time, before it starts, and stop the run.
func TestEnforcementRefusesWhatTheAnalysisDidNotAllow(t *testing.T) {
	h := newHost(t)
	p := h.plan("ok one && evil two; ok three")
	evil := filepath.Join(h.bin, "evil")
	var kept []string
	for _, e := range p.Executables {
		if e != evil {
			kept = append(kept, e)
		}
	}
	p.Executables = kept
	out, errOut, code := h.run(p)
	if code != shellrun.DeniedExit || !strings.Contains(errOut, "SYSTEM_RUN_DENIED") || !strings.Contains(errOut, evil) {
		t.Fatalf("exit %d stderr %q; want %d and SYSTEM_RUN_DENIED naming %s", code, errOut, shellrun.DeniedExit, evil)
	}
	if h.ran("evil") {
		t.Fatal("the refused program ran")
	}
	if !strings.Contains(out, "one") || strings.Contains(out, "three") {
		t.Fatalf("stdout %q: the run must stop at the refusal", out)
	}
}

// TestPlanWithoutFileIDsRefuses: an enforced plan that lost its file ids
// (absent from the JSON, or an empty map) must not fall back to starting
// allowed programs by name: nothing starts.
func TestPlanWithoutFileIDsRefuses(t *testing.T) {
	if !runner.FileIDsSupported {
		t.Skip("no file ids on " + runtime.GOOS)
	}
	h := newHost(t)
	for _, files := range []map[string]runner.FileID{nil, {}} {
		p := h.plan("ok one")
		p.Files = files
		_, errOut, code := h.run(p)
		if code != shellrun.DeniedExit || !strings.Contains(errOut, "no file id") {
			t.Fatalf("files %v: exit %d stderr %q; want %d naming the missing file id", files, code, errOut, shellrun.DeniedExit)
		}
		if h.ran("ok") {
			t.Fatalf("files %v: a program without a file id ran", files)
		}
	}
}

func TestEnforcementRefusals(t *testing.T) {
	h := newHost(t)
	tests := []struct {
		name, text, errHas string
	}{
		{"unvouched builtin", "eval 'evil x'", "eval runs its arguments"},
		{"bash's jobs -x", "jobs -x evil", "jobs is a builtin the interpreter does not vouch for"},
		{"file write", "ok > out.txt", "only /dev/null may be opened"},
		{"file read", "ok < /etc/passwd", "only /dev/null may be opened"},
		{"printf -v", "printf -v x y", "printf -v"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := h.run(h.plan(tt.text))
			if code == 0 || !strings.Contains(errOut, tt.errHas) {
				t.Fatalf("%q: exit %d stderr %q; want a refusal containing %q", tt.text, code, errOut, tt.errHas)
			}
			if h.ran("evil") {
				t.Fatal("evil ran")
			}
			if _, err := os.Stat(filepath.Join(h.work, "out.txt")); err == nil {
				t.Fatal("a file was written")
			}
		})
	}
}

// TestPlanMustVerify: a plan whose text does not match its hash, or that
// is not in canonical form, runs nothing.
func TestPlanMustVerify(t *testing.T) {
	h := newHost(t)
	p := h.plan("ok a")
	p.Text = "evil a\n"
	if _, errOut, code := h.run(p); code != shellrun.DeniedExit || !strings.Contains(errOut, "hash") {
		t.Fatalf("tampered text: exit %d stderr %q", code, errOut)
	}
	p = h.plan("ok a")
	p.Text = "ok   a"
	p.Hash = shellcmd.Hash(p.Text)
	if _, errOut, code := h.run(p); code != shellrun.DeniedExit || !strings.Contains(errOut, "canonical") {
		t.Fatalf("non-canonical text: exit %d stderr %q", code, errOut)
	}
	if h.ran("evil") || h.ran("ok") {
		t.Fatal("something ran")
	}
}

// TestAppliedWrappers: env, nice, nohup, timeout and time are applied by
// the interpreter; a planted program of that name never runs.
func TestAppliedWrappers(t *testing.T) {
	h := newHost(t)
	for _, n := range []string{"env", "nice", "nohup", "timeout", "time"} {
		if err := os.WriteFile(filepath.Join(h.bin, n), []byte("#!/bin/sh\n: > "+filepath.Join(filepath.Dir(h.bin), "ran-evil")+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		text, out, errHas string
		code              int
	}{
		{text: "env A=1 showenv A", out: "A=1\n"},
		{text: "env -i showenv HOME", out: "HOME=unset\n"},
		{text: "env -u LANG showenv LANG", out: "LANG=unset\n"},
		{text: "nice -n 3 ok n", out: filepath.Join(h.bin, "ok") + " n\n"},
		{text: "nohup ok h", out: filepath.Join(h.bin, "ok") + " h\n"},
		{text: "time -p ok t", out: filepath.Join(h.bin, "ok") + " t\n", errHas: "real "},
		{text: "timeout 0.2 slow", code: 124},
		{text: "timeout -s KILL 0.2 slow", code: 124},
		{text: "timeout --preserve-status 0.2 slow", code: 128 + 15},
		{text: "sh -c 'ok x; showenv B' arg", out: filepath.Join(h.bin, "ok") + " x\nB=unset\n"},
		{text: "bash -c 'exit 7'", code: 7},
		// Applied around a nested shell too, never dropped.
		{text: "timeout 0.2 sh -c 'slow'", code: 124},
		{text: "time -p sh -c 'ok t'", out: filepath.Join(h.bin, "ok") + " t\n", errHas: "real "},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			os.Remove(filepath.Join(filepath.Dir(h.bin), "ran-evil"))
			p := h.plan(tt.text)
			p.EnvAllow = []string{"A"}
			out, errOut, code := h.run(p, "LANG=C")
			if code != tt.code || (tt.out != "" && out != tt.out) || !strings.Contains(errOut, tt.errHas) {
				t.Fatalf("exit %d stdout %q stderr %q; want exit %d stdout %q stderr containing %q", code, out, errOut, tt.code, tt.out, tt.errHas)
			}
			if h.ran("evil") {
				t.Fatal("a planted wrapper program ran")
			}
		})
	}
}

// unanalysed returns a plan for text as if the analysis had vouched for
// it and allowed exactly allowed: what the run-time guard must hold on its
// own when the analysis is wrong.
func (h *host) unanalysed(text string, allowed ...string) shellrun.Plan {
	h.t.Helper()
	_, canonical, err := shellcmd.Canonical(text)
	if err != nil {
		h.t.Fatalf("%q does not parse: %v", text, err)
	}
	var exes []string
	for _, n := range allowed {
		exes = append(exes, filepath.Join(h.bin, n))
	}
	return shellrun.Plan{Text: canonical, Hash: shellcmd.Hash(canonical), Enforce: true, Executables: exes, Files: runner.IDsOf(exes), PATH: h.path, Home: h.home}
}

// TestGuardAlone runs texts the analysis refuses through the interpreter
// as if the analysis had allowed them, with only ok allowed: each must be
// refused at run time (exit 126), start nothing else, and stop the run.
func TestGuardAlone(t *testing.T) {
	h := newHost(t)
	elsewhere := t.TempDir()
	if err := os.WriteFile(filepath.Join(h.work, "f"), []byte("evil sourced\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, text, errHas string }{
		{"command eval", "command eval 'evil x'; ok after", "eval runs its arguments"},
		{"command command eval", "command command eval 'evil x'; ok after", "eval runs its arguments"},
		{"command builtin", "command builtin eval 'evil x'; ok after", "builtin runs builtins"},
		{"command dot", "command . ./f; ok after", ". runs a file"},
		{"command source", "command -- source ./f; ok after", "source runs a file"},
		{"refusal in command substitution", "ok \"$(evil x)\"; ok after", "not an executable the analysis allowed"},
		{"refusal in a pipeline", "evil x | ok; ok after", "not an executable the analysis allowed"},
		{"refusal in the background", "evil x & wait; ok after", "not an executable the analysis allowed"},
		{"partly quoted here-document", "ok <<'A'B\n$(evil x)\nAB\nok after", "not an executable the analysis allowed"},
		{"LD_PRELOAD", "LD_PRELOAD=/tmp/x.so ok; ok after", "LD_PRELOAD can change"},
		{"exported GCONV_PATH", "export GCONV_PATH=/tmp; ok; ok after", "GCONV_PATH can change"},
		{"ZIPOPT not allowed", "ZIPOPT='-TT x' ok; ok after", "ZIPOPT is not in the environment allowlist"},
		{"env wrapper", "env MAKEFLAGS=x ok; ok after", "MAKEFLAGS is not in the environment allowlist"},
		{"TMPDIR from the command", "TMPDIR=" + elsewhere + " ok; ok after", "TMPDIR is not in the environment allowlist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(filepath.Join(filepath.Dir(h.bin), "ran-evil"))
			out, errOut, code := h.run(h.unanalysed(tt.text, "ok"))
			if code != shellrun.DeniedExit || !strings.Contains(errOut, tt.errHas) {
				t.Fatalf("exit %d stderr %q; want %d and %q", code, errOut, shellrun.DeniedExit, tt.errHas)
			}
			if h.ran("evil") {
				t.Fatal("evil ran")
			}
			if strings.Contains(out, "after") {
				t.Fatalf("stdout %q: the run went on after the refusal", out)
			}
		})
	}
	// The interpreter opens its own temporary files (named sh-interp-* in
	// its temporary directory) past the open handler: that directory is a
	// private one, never the command's TMPDIR.
	for _, text := range []string{
		"TMPDIR=" + elsewhere + "; printf 'x\\n' > " + elsewhere + "/sh-interp-1",
		"export TMPDIR=" + elsewhere + "; printf 'x\\n' > " + elsewhere + "/sh-interp-1",
		"printf 'x\\n' > " + elsewhere + "/sh-interp-1",
	} {
		p := h.unanalysed(text)
		p.Env = map[string]string{"TMPDIR": elsewhere}
		if _, errOut, code := h.run(p, "TMPDIR="+elsewhere); code == 0 {
			t.Errorf("%q: exit 0, stderr %q; want the write refused", text, errOut)
		}
		if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
			t.Fatalf("%q wrote into the command's TMPDIR: %v", text, ents)
		}
	}
}

// TestEnvAllowlist: a name the policy allows reaches the program; the
// built-in safe set needs no entry; the host's own variables pass as they
// are.
func TestEnvAllowlist(t *testing.T) {
	h := newHost(t)
	p := h.unanalysed("ZIPOPT=z showenv ZIPOPT; LC_ALL=C showenv LC_ALL; showenv HOSTVAR", "showenv")
	p.EnvAllow = []string{"ZIP*"}
	out, errOut, code := h.run(p, "HOSTVAR=h")
	if code != 0 || out != "ZIPOPT=z\nLC_ALL=C\nHOSTVAR=h\n" {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, errOut)
	}
	// The request's env travels in the plan and is checked like the rest.
	p = h.unanalysed("showenv REQ", "showenv")
	p.Env = map[string]string{"REQ": "r"}
	if _, errOut, code := h.run(p); code != shellrun.DeniedExit || !strings.Contains(errOut, "REQ is not in the environment allowlist") {
		t.Fatalf("request env without an entry: exit %d stderr %q", code, errOut)
	}
	p.EnvAllow = []string{"REQ"}
	if out, errOut, code := h.run(p); code != 0 || out != "REQ=r\n" {
		t.Fatalf("request env with an entry: exit %d stdout %q stderr %q", code, out, errOut)
	}
}

// TestBounds: a text with no program in it still ends, with BoundExit and
// a message naming the bound, instead of growing until the run's timeout.
func TestBounds(t *testing.T) {
	h := newHost(t)
	p := h.unanalysed("x=aaaaaaaaaaaaaaaa; while :; do x=$x$x; done")
	p.MemoryBound = 64 << 20
	if _, errOut, code := h.run(p); code != shellrun.BoundExit || !strings.Contains(errOut, "memory bound reached") {
		t.Fatalf("memory: exit %d stderr %q", code, errOut)
	}
	p = h.unanalysed("while :; do slow & done", "slow")
	p.GoroutineBound = 64
	if _, errOut, code := h.run(p); code != shellrun.BoundExit || !strings.Contains(errOut, "goroutine") {
		t.Fatalf("goroutines: exit %d stderr %q", code, errOut)
	}
}
