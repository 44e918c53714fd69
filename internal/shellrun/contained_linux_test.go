package shellrun_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/shellrun"
)

// TestContainedSubstitutionGuard: a command substitution in argument
// position runs in the interpreter, so the guard checks the start inside
// it. A plan that does not allow evil (an analysis that got it wrong)
// refuses it at run time; with the guard off (Enforce false) it runs.
func TestContainedSubstitutionGuard(t *testing.T) {
	h := newHost(t)
	evil := filepath.Join(h.bin, "evil")
	p := h.plan(`ok "$(evil)"`)
	p.Executables = []string{filepath.Join(h.bin, "ok")}
	_, errOut, code := h.run(p)
	if code != shellrun.DeniedExit || !strings.Contains(errOut, "SYSTEM_RUN_DENIED") || !strings.Contains(errOut, evil) {
		t.Fatalf("exit %d stderr %q; want %d refusing %s", code, errOut, shellrun.DeniedExit, evil)
	}
	if h.ran("evil") || h.ran("ok") {
		t.Fatal("a program ran after the refusal inside $(…)")
	}
	p.Enforce = false // control: no guard
	if _, errOut, code := h.run(p); code != 0 || !h.ran("evil") {
		t.Fatalf("control: exit %d stderr %q; evil ran=%v, want it to run without the guard", code, errOut, h.ran("evil"))
	}
}

// TestContainedWrites runs redirections in the interpreter confined to
// the work directory (Landlock, applied by the interpreter process as the
// host's plan says), with the open check of the contained rules. Each
// attack is refused, and a control shows its effect with the defence off:
// the open check off (the jail alone refuses writes outside the roots but
// not to a persistence path inside them), then no confinement at all.
func TestContainedWrites(t *testing.T) {
	if confine.KernelABI() < 3 {
		t.Skip("Landlock ABI 3 needed")
	}
	h := newHost(t)
	root := filepath.Dir(h.bin)
	home, tmp := filepath.Join(root, "home"), filepath.Join(root, "tmp")
	hooks := filepath.Join(h.work, ".git", "hooks")
	for _, d := range []string{home, tmp, hooks, filepath.Join(root, "outside")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "outside", "target"), filepath.Join(h.work, "link")); err != nil {
		t.Fatal(err)
	}
	c := &confine.Confinement{Writable: []string{h.work, tmp}, ReadOnly: []string{hooks}}
	walls := &shellrun.Walls{Writable: c.Writable, ReadOnly: c.ReadOnly}
	env := "TMPDIR=" + tmp // the run's private tmp, as the host gives it
	// The plan allows ok whatever the analysis said of the target: the
	// open check and the jail are what is tested.
	// say prints its arguments and nothing else: ok's marker file lies
	// outside the roots.
	say := filepath.Join(h.bin, "say")
	if err := os.WriteFile(say, []byte("#!/bin/sh\necho \"ok $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ok := []string{say}
	plan := func(text string, contained, enforce bool, conf *confine.Confinement) shellrun.Plan {
		p := h.plan(text)
		p.Executables, p.Files = ok, runner.IDsOf(ok)
		p.Enforce, p.Confine = enforce, conf
		if contained {
			p.Contained = walls
		}
		return p
	}
	read := func(p string) string {
		b, _ := os.ReadFile(p)
		return string(b)
	}
	reset := func(paths ...string) {
		for _, p := range paths {
			_ = os.Remove(p)
		}
	}

	// Allowed: a write inside the roots, a read.
	out := filepath.Join(h.work, "build.log")
	if _, errOut, code := h.run(plan("say build > build.log 2>&1", true, true, c), env); code != 0 || !strings.Contains(read(out), "ok build") {
		t.Fatalf("write inside the roots: exit %d stderr %q file %q", code, errOut, read(out))
	}
	if o, errOut, code := h.run(plan("say < build.log", true, true, c), env); code != 0 {
		t.Fatalf("read: exit %d stdout %q stderr %q", code, o, errOut)
	}
	// In the standing jail the plan carries no Confine (the jail holds the
	// interpreter): the walls alone drive the open check.
	if _, errOut, code := h.run(plan("say jailed > jailed.log", true, true, nil), env); code != 0 || read(filepath.Join(h.work, "jailed.log")) != "ok jailed\n" {
		t.Fatalf("write inside the roots without Confine: exit %d stderr %q", code, errOut)
	}
	// Without the contained flag the interpreter opens /dev/null only.
	if _, errOut, code := h.run(plan("say > again.log", false, true, c), env); code == 0 || !strings.Contains(errOut, "only /dev/null") || read(filepath.Join(h.work, "again.log")) != "" {
		t.Fatalf("strict plan: exit %d stderr %q", code, errOut)
	}

	for _, tc := range []struct {
		name, text, target string
		// jailRefuses: Landlock alone refuses it (outside the roots).
		jailRefuses bool
	}{
		{"~/.bashrc outside the roots", "say x > " + filepath.Join(home, ".bashrc"), filepath.Join(home, ".bashrc"), true},
		{"authorized_keys outside the roots", "say x >> " + filepath.Join(home, "authorized_keys"), filepath.Join(home, "authorized_keys"), true},
		{"a hook inside the roots", "say x > .git/hooks/pre-commit", filepath.Join(hooks, "pre-commit"), false},
		{"a link inside the roots to a file outside", "say x > link", filepath.Join(root, "outside", "target"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reset(tc.target)
			_, errOut, code := h.run(plan(tc.text, true, true, c), env)
			if code != shellrun.DeniedExit || !strings.Contains(errOut, "SYSTEM_RUN_DENIED") {
				t.Errorf("exit %d stderr %q; want %d SYSTEM_RUN_DENIED", code, errOut, shellrun.DeniedExit)
			}
			if read(tc.target) != "" {
				t.Fatalf("%s was written", tc.target)
			}
			// The open check alone (a jailed interpreter's plan has no
			// Confine).
			if _, errOut, code := h.run(plan(tc.text, true, true, nil), env); code != shellrun.DeniedExit || read(tc.target) != "" {
				t.Errorf("open check alone: exit %d stderr %q, target %q", code, errOut, read(tc.target))
			}
			// The open check off, the jail on.
			_, errOut, _ = h.run(plan(tc.text, true, false, c), env)
			if written := strings.Contains(read(tc.target), "ok x"); written == tc.jailRefuses {
				t.Errorf("jail alone: written=%v (stderr %q), want written=%v", written, errOut, !tc.jailRefuses)
			}
			reset(tc.target)
			// Control: no defence at all; the attack works.
			if _, errOut, _ := h.run(plan(tc.text, true, false, nil), env); !strings.Contains(read(tc.target), "ok x") {
				t.Errorf("control: %s not written without the defences (stderr %q)", tc.target, errOut)
			}
			reset(tc.target)
		})
	}
}
