package confine

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/exechost/exechost/internal/testdep"
)

// needLandlock skips (loudly) on a kernel without the ABI the test needs.
func needLandlock(t testing.TB, abi int) {
	t.Helper()
	if got := KernelABI(); got < abi {
		testdep.Missing(t, "landlock", fmt.Sprintf("this test needs Landlock ABI %d (the kernel offers %d)", abi, got))
	}
}

// layout is a tree with a writable work directory, a protected state
// directory holding a secret, and an outside directory.
type layout struct{ root, work, state, outside, secret string }

func newLayout(t testing.TB) layout {
	t.Helper()
	return newLayoutIn(t, t.TempDir())
}

// newLayoutIn makes the layout in root.
func newLayoutIn(t testing.TB, root string) layout {
	t.Helper()
	l := layout{root: root, work: filepath.Join(root, "work"), state: filepath.Join(root, "state"), outside: filepath.Join(root, "outside")}
	for _, d := range []string{l.work, l.state, l.outside} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	l.secret = filepath.Join(l.state, "exec-approvals.json")
	if err := os.WriteFile(l.secret, []byte(`{"version":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return l
}

// runWrapped runs argv through the launcher (or directly when c is nil)
// in dir and returns its combined output and error.
func runWrapped(t *testing.T, c *Confinement, dir string, argv ...string) (string, error) {
	t.Helper()
	return launchHanded(t, c, nil, dir, argv...)
}

// TestLauncherConfines runs one shell script through the launcher that
// writes in the work directory, outside it, and into and out of the
// protected directory; then runs it again unconfined as the control, which
// must see every effect (so the confined run cannot pass by failing).
func TestLauncherConfines(t *testing.T) {
	needLandlock(t, 3)
	script := `echo w > work/in; echo o > outside/out; echo p > state/new; cat state/exec-approvals.json > work/leak; echo '{"security":"full"}' > state/exec-approvals.json; : > state/exec-approvals.json; exit 0`
	for _, confined := range []bool{true, false} {
		l := newLayout(t)
		var c *Confinement
		if confined {
			c = &Confinement{Writable: []string{l.work}, Protected: []string{l.state}, Network: NetworkNone}
		}
		// The confined script's refused redirections fail it; what
		// counts is which effects happened.
		out, _ := runWrapped(t, c, l.root, "/bin/sh", "-c", script)
		if _, err := os.Stat(filepath.Join(l.work, "in")); err != nil {
			t.Errorf("confined=%v: a write in the writable root failed: %v\n%s", confined, err, out)
		}
		secret, _ := os.ReadFile(l.secret)
		leak, _ := os.ReadFile(filepath.Join(l.work, "leak"))
		_, outErr := os.Stat(filepath.Join(l.outside, "out"))
		_, newErr := os.Stat(filepath.Join(l.state, "new"))
		if confined {
			if string(secret) != `{"version":1}` || len(leak) > 0 || outErr == nil || newErr == nil {
				t.Errorf("confined run escaped: secret=%q leak=%q outside written=%v state written=%v\n%s", secret, leak, outErr == nil, newErr == nil, out)
			}
			if !strings.Contains(out, "Permission denied") {
				t.Errorf("confined run's refusals not reported:\n%s", out)
			}
		} else if string(secret) == `{"version":1}` || outErr != nil || newErr != nil {
			t.Errorf("control: the script did not have its effects (secret=%q outside=%v state=%v); the confined run proves nothing\n%s", secret, outErr, newErr, out)
		}
	}
}

// TestLauncherNetworkNone connects to a loopback listener from a confined
// command (refused) and from the unconfined control (accepted).
func TestLauncherNetworkNone(t *testing.T) {
	needLandlock(t, 4)
	bash := testdep.Binary(t, "bash")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	script := "exec 3<>/dev/tcp/127.0.0.1/" + strconv.Itoa(port) + " && echo connected"
	for _, confined := range []bool{true, false} {
		var c *Confinement
		if confined {
			c = &Confinement{Writable: []string{t.TempDir()}, Network: NetworkNone}
		}
		out, _ := runWrapped(t, c, t.TempDir(), bash, "-c", script)
		if got := strings.Contains(out, "connected"); got == confined {
			t.Errorf("confined=%v: connected=%v\n%s", confined, got, out)
		}
	}
}

// TestAroundProtected checks the base layer built around a protected
// directory: none of its ancestors is granted anything beneath it but
// listing, and its siblings get every right (the run's own layer narrows
// writes to the writable roots).
func TestAroundProtected(t *testing.T) {
	l := newLayout(t)
	c, dropped := Confinement{Writable: []string{l.root, filepath.Join(l.state, "sub")}, Protected: []string{l.state}}.Resolve()
	if len(dropped) != 1 {
		t.Errorf("a writable root inside the protected set was not dropped: %v", dropped)
	}
	gs := grantsOf(t, new(Builder), &c)
	for _, g := range gs {
		if g.path == "/" && g.rights != 0 && g.rights&^ll.AccessFSReadDir != 0 {
			t.Errorf("/ granted %v beneath it", g.rights)
		}
		if g.path != "/" && (within(l.state, g.path) || within(g.path, l.state)) {
			t.Errorf("rule on %s reaches the protected %s", g.path, l.state)
		}
	}
	has := func(p string, r uint64) bool {
		for _, g := range gs {
			if g.path == p && uint64(g.rights)&r == r {
				return true
			}
		}
		return false
	}
	if !has(l.work, allRights) || !has(l.outside, allRights) {
		t.Errorf("the protected directory's siblings inside the writable root are not writable: %v", gs)
	}
}

// grant is one rule a walk emitted.
type grant struct {
	path   string
	rights landlock.AccessFSSet
}

// grantsOf returns the rules of the base layer b builds around c's
// protected set.
func grantsOf(t testing.TB, b *Builder, c *Confinement) []grant {
	t.Helper()
	var gs []grant
	w := &walk{b: b, protected: c.Protected, emit: func(p string, _ int, rights landlock.AccessFSSet) error {
		gs = append(gs, grant{p, rights})
		return nil
	}}
	if err := w.baseGrants(); err != nil {
		t.Fatal(err)
	}
	return gs
}

// TestLauncherFailsClosed: a confinement the launcher cannot apply (a bad
// value) starts nothing and exits 126 saying why.
func TestLauncherFailsClosed(t *testing.T) {
	l := newLayout(t)
	marker := filepath.Join(l.work, "ran")
	out, err := runWrapped(t, &Confinement{Writable: []string{l.work}, Network: "lan"}, l.work, "/bin/sh", "-c", "touch "+marker)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 126 || !strings.Contains(out, "confine.network") {
		t.Errorf("bad confinement: %v\n%s", err, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the program ran under a confinement that could not be applied")
	}
}
