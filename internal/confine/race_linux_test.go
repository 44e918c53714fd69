package confine

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// runConfinedBy runs argv in dir, forked from a fresh thread that b
// restricts to c (as the runner's in-thread start does), and returns its
// combined output. The thread is never unlocked: it ends with its
// goroutine.
func runConfinedBy(t *testing.T, b *Builder, c *Confinement, dir string, argv ...string) string {
	t.Helper()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread is restricted
		if _, err := b.ApplyThread(c, KernelABI()); err != nil {
			done <- result{err: err}
			return
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir
		out, _ := cmd.CombinedOutput() // refused writes fail the script
		done <- result{out: string(out)}
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.out
}

// TestRulesRaceSymlinkSwap swaps an entry beside the protected directory
// for a symbolic link to it at the moment between the listing of its
// directory and the opening of the entry (the Builder's between hook),
// then runs a confined command that writes and reads through the link:
// both are refused, and nothing is granted for the link. The unconfined
// control shows the script's writes happen when nothing stops them.
func TestRulesRaceSymlinkSwap(t *testing.T) {
	needLandlock(t, 3)
	script := `echo pwned > victim/pwned; cat victim/exec-approvals.json > work/leak; echo ok > work/in; exit 0`
	l := newLayout(t)
	victim := filepath.Join(l.root, "victim")
	if err := os.Mkdir(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	c, _ := Confinement{Writable: []string{l.root}, Protected: []string{l.state}}.Resolve()
	root := c.Writable[0] // resolved, as the walk names it
	swapped := false
	b := &Builder{between: func(dir, name string) {
		if dir != root || name != "victim" || swapped {
			return
		}
		if err := os.Rename(victim, victim+".old"); err != nil {
			t.Error(err)
		}
		if err := os.Symlink(l.state, victim); err != nil {
			t.Error(err)
		}
		swapped = true
	}}
	out := runConfinedBy(t, b, &c, l.root, "/bin/sh", "-c", script)
	if !swapped {
		t.Fatal("the entry was never swapped: the test proves nothing")
	}
	if _, err := os.Stat(filepath.Join(l.work, "in")); err != nil {
		t.Errorf("a write in the writable root failed: %v\n%s", err, out)
	}
	leak, _ := os.ReadFile(filepath.Join(l.work, "leak"))
	if _, err := os.Stat(filepath.Join(l.state, "pwned")); err == nil || len(leak) > 0 {
		t.Errorf("the confined command reached the protected directory through the swapped link: wrote=%v leak=%q\n%s", err == nil, leak, out)
	}
	if !strings.Contains(out, "Permission denied") {
		t.Errorf("the refusals were not reported:\n%s", out)
	}
	// The control: the same script unconfined has its effects.
	if out, err := runWrapped(t, nil, l.root, "/bin/sh", "-c", script); err != nil {
		t.Fatalf("control: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(l.state, "pwned")); err != nil {
		t.Errorf("control: the unconfined script did not write through the link: %v", err)
	}
}

// TestRulesSkipProtectedMovedIntoPlace: the protected directory moved in
// place of an entry beside it, between the listing and the open, is
// recognised by its identity and granted nothing.
func TestRulesSkipProtectedMovedIntoPlace(t *testing.T) {
	l := newLayout(t)
	victim := filepath.Join(l.root, "victim")
	if err := os.Mkdir(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	c, _ := Confinement{Writable: []string{l.root}, Protected: []string{l.state}}.Resolve()
	root := c.Writable[0]
	moved := false
	b := &Builder{between: func(dir, name string) {
		if dir != root || name != "victim" || moved {
			return
		}
		if err := os.Rename(victim, victim+".old"); err != nil {
			t.Error(err)
		}
		if err := os.Rename(l.state, victim); err != nil {
			t.Error(err)
		}
		moved = true
	}}
	gs := grantsOf(t, b, &c)
	if !moved {
		t.Fatal("the protected directory was never moved: the test proves nothing")
	}
	for _, g := range gs {
		if g.path == filepath.Join(root, "victim") {
			t.Errorf("the protected directory, moved in place of an entry, is granted %v", g.rights)
		}
	}
}
