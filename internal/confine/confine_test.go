package confine

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCheckFallback runs Check against injected kernel ABIs: no Landlock,
// too old for network none, and enough.
func TestCheckFallback(t *testing.T) {
	for _, tc := range []struct {
		abi     int
		c       Confinement
		wantErr bool
		warn    bool
	}{
		{0, Confinement{Protected: []string{"/s"}}, true, false},
		{0, Confinement{Protected: []string{"/s"}, Unsupported: UnsupportedWarn}, false, true},
		{3, Confinement{Writable: []string{"/w"}, Network: NetworkNone}, true, false},
		{3, Confinement{Writable: []string{"/w"}}, false, false},
		{7, Confinement{Writable: []string{"/w"}, Network: NetworkNone}, false, false},
		{0, Confinement{Writable: []string{"/"}}, false, false}, // nothing to enforce
	} {
		warn, err := tc.c.Check(tc.abi)
		if (err != nil) != tc.wantErr || (warn != "") != tc.warn {
			t.Errorf("abi %d %+v: warn=%q err=%v", tc.abi, tc.c, warn, err)
		}
		if err != nil && (!errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "hint:")) {
			t.Errorf("abi %d: error %v is not actionable ErrUnsupported", tc.abi, err)
		}
	}
}

// TestValidateAndDescribe refuses bad values naming the field, and
// describes what a confinement lets a run do.
func TestValidateAndDescribe(t *testing.T) {
	for _, c := range []Confinement{{Network: "lan"}, {Unsupported: "maybe"}, {Writable: []string{"rel"}},
		{Hidden: []string{"rel"}}, {ReadOnly: []string{"rel"}}, {Sockets: []string{"rel"}}} {
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), "confine") {
			t.Errorf("%+v: error %v", c, err)
		}
	}
	c := &Confinement{Writable: []string{"/w"}, Protected: []string{"/s"}, Network: NetworkNone}
	if got, want := c.Describe(), "writes: /w · network: none · sockets: none · hidden: none · no access: /s"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	c = &Confinement{Writable: []string{"/w", "/t", "/x"}, Protected: []string{"/s"}, Network: NetworkAll,
		Sockets: []string{"/run/docker.sock"}, Hidden: []string{"/h/.ssh", "/h/.aws"}, ReadOnly: []string{"/w/.git/hooks", "/w/.git/config"}}
	want := "writes: cwd, tmp, /x · network: all · sockets: /run/docker.sock · hidden: 2 secrets · read-only inside: 2 persistence paths · no access: /s"
	if got := c.Reach(map[string]string{"/w": "cwd", "/t": "tmp"}); got != want {
		t.Errorf("Reach = %q, want %q", got, want)
	}
	if got, want := (&Confinement{Writable: []string{"/"}, Protected: []string{"/s"}}).Describe(), "writes: anywhere · network: all · sockets: all · hidden: none · no access: /s"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	if got := (&Confinement{Writable: []string{"/"}}).Describe(); got != "none" {
		t.Errorf("an inactive confinement is described as %q", got)
	}
}

// TestDescribeAncestor says plainly that a writable root containing the
// protected set gets no new entries directly in it.
func TestDescribeAncestor(t *testing.T) {
	c := &Confinement{Writable: []string{"/home/u"}, Protected: []string{"/home/u/.openclaw"}}
	if got := c.Describe(); !strings.Contains(got, "no new entries directly in /home/u ") {
		t.Errorf("Describe = %q", got)
	}
}

// TestResolveLeavesPlaceholder: a relative path (the host's "$TMPDIR" in a
// description) is kept as written and not looked up, even where this
// process's working directory holds a link of that name; absolute paths
// are still resolved.
func TestResolveLeavesPlaceholder(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, link := range []string{"$TMPDIR", "via"} {
		if err := os.Symlink(real, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	c, _ := Confinement{Writable: []string{filepath.Join(dir, "via"), "$TMPDIR"}, Protected: []string{"/nonexistent/state"}}.Resolve()
	realDir, err := filepath.EvalSymlinks(real)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{realDir, "$TMPDIR"}; !slices.Equal(c.Writable, want) {
		t.Errorf("Writable = %q, want %q", c.Writable, want)
	}
}

// TestWithProtectedAsResolve: adding a protected path to a resolved
// confinement gives what resolving the confinement with it in gives: its
// real path (through a link too), the writable roots inside it dropped,
// none twice, and the confinement it was added to unchanged.
func TestWithProtectedAsResolve(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"work/state", "other", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "work", "state"), filepath.Join(dir, "statelink")); err != nil {
		t.Fatal(err)
	}
	base := Confinement{Writable: []string{filepath.Join(dir, "work", "state"), filepath.Join(dir, "other"), filepath.Join(dir, "tmp")}}
	resolved, _ := base.Resolve()
	for _, add := range []string{filepath.Join(dir, "statelink"), filepath.Join(dir, "work"), filepath.Join(dir, "missing"), "$STATE"} {
		got := resolved.WithProtected(add)
		withIt := base
		withIt.Protected = []string{add}
		want, _ := withIt.Resolve()
		if !slices.Equal(got.Writable, want.Writable) || !slices.Equal(got.Protected, want.Protected) {
			t.Errorf("WithProtected(%s): writable %q protected %q, want %q %q", add, got.Writable, got.Protected, want.Writable, want.Protected)
		}
		if again := got.WithProtected(add); !slices.Equal(again.Protected, got.Protected) || !slices.Equal(again.Writable, got.Writable) {
			t.Errorf("WithProtected(%s) twice: protected %q writable %q", add, again.Protected, again.Writable)
		}
	}
	if len(resolved.Writable) != 3 || len(resolved.Protected) != 0 {
		t.Errorf("the confinement added to changed: writable %q protected %q", resolved.Writable, resolved.Protected)
	}
}

// TestWithWritableAsResolve: adding a root to a resolved confinement gives
// what resolving the confinement with the root in it gives: the root's
// real path, none inside the protected set, none twice, and the
// confinement it was added to unchanged.
func TestWithWritableAsResolve(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"work", "state/inner", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "tmp"), filepath.Join(dir, "tmplink")); err != nil {
		t.Fatal(err)
	}
	base := Confinement{Writable: []string{filepath.Join(dir, "work")}, Protected: []string{filepath.Join(dir, "state")}}
	resolved, _ := base.Resolve()
	for _, add := range []string{filepath.Join(dir, "tmplink"), filepath.Join(dir, "state", "inner"), filepath.Join(dir, "work"), "$TMPDIR"} {
		got := resolved.WithWritable(add)
		withIt := base
		withIt.Writable = append(slices.Clone(base.Writable), add)
		want, _ := withIt.Resolve()
		if !slices.Equal(got.Writable, want.Writable) || !slices.Equal(got.Protected, want.Protected) {
			t.Errorf("WithWritable(%s): writable %q protected %q, want %q %q", add, got.Writable, got.Protected, want.Writable, want.Protected)
		}
	}
	if len(resolved.Writable) != 1 {
		t.Errorf("the confinement added to changed: %q", resolved.Writable)
	}
}
