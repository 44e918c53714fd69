package confine

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// probe is a script printing, for each directory named on its command
// line, whether a confined command can read its file f (r) and append to
// it (w). Appending changes no directory's entries.
const probe = `for d in "$@"; do
	r=-; w=-
	cat "$d/f" >/dev/null 2>&1 && r=r
	( echo x >> "$d/f" ) 2>/dev/null && w=w
	echo "$d $r$w"
done`

// probed runs probe over dirs (relative to root), confined to c by b, and
// returns its report.
func probed(t *testing.T, b *Builder, c *Confinement, root string, dirs ...string) string {
	t.Helper()
	return runConfinedBy(t, b, c, root, append([]string{"/bin/sh", "-c", probe, "probe"}, dirs...)...)
}

// probedLauncher runs probe over dirs through a real launcher (this test
// binary re-executed) confined to c and handed b's base layer as
// descriptor 4, as the runner hands it, and returns its report.
func probedLauncher(t *testing.T, b *Builder, c *Confinement, root string, dirs ...string) string {
	t.Helper()
	base, err := b.Base(c, KernelABI())
	if err != nil || base == nil {
		t.Fatalf("no base layer to hand: %v", err)
	}
	defer base.Close()
	run, err := base.Hand(c, 4)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := launchHanded(t, run, base.File(), root, append([]string{"/bin/sh", "-c", probe, "probe"}, dirs...)...)
	return out
}

// launchHanded runs argv in dir through a real launcher (this test binary
// re-executed) confined to c (argv as it is when c is nil: the control),
// with handed (when not nil) at descriptor 4,
// which c.Base may name, and returns its combined output and error.
func launchHanded(t *testing.T, c *Confinement, handed *os.File, dir string, argv ...string) (string, error) {
	t.Helper()
	if c != nil {
		var err error
		if argv, err = Wrap(c, argv); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	if handed != nil {
		cmd.ExtraFiles = []*os.File{nil, handed}
	}
	out, err := cmd.CombinedOutput() // refused writes fail a script
	return string(out), err
}

// mkdirF makes the directory d with a file f in it.
func mkdirF(t *testing.T, d string) {
	t.Helper()
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "f"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// ctime is d's change time.
func ctime(t *testing.T, d string) unix.Timespec {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(d, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ctim
}

// stableRoot is a fresh directory for a test whose directories down to it
// change as seldom as possible: in the home directory (where the state
// directory normally is), not in a temporary directory other tests keep
// changing; t.TempDir when the home directory is not writable.
func stableRoot(t *testing.T) string {
	if home, err := os.UserHomeDir(); err == nil {
		if d, err := os.MkdirTemp(home, ".exechost-rules-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// timesDownTo returns the change and modification times of the
// directories from / down to d's parent.
func timesDownTo(t *testing.T, d string) []unix.Timespec {
	t.Helper()
	var ts []unix.Timespec
	for p := filepath.Dir(d); ; p = filepath.Dir(p) {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		ts = append(ts, st.Ctim, st.Mtim)
		if p == "/" {
			return ts
		}
	}
}

// TestRulesReuse runs a real confined process that probes what it may read
// and write, with the base layer reused (a Builder kept across runs) and
// built afresh, and compares them: unchanged (the kept layer is reused),
// after entries are added, removed and renamed beside the protected
// directory (it is rebuilt, and a new entry is reachable), after a change
// deeper down (reused), and for another confinement with the same
// protected set (reused, and its own writable roots apply). A directory
// above the test's root changed by another process also rebuilds the
// layer, rightly: a step expecting reuse is then tried again.
func TestRulesReuse(t *testing.T) {
	needLandlock(t, 3)
	l := newLayoutIn(t, stableRoot(t))
	for _, d := range []string{l.work, l.outside, l.state, filepath.Join(l.root, "gone")} {
		mkdirF(t, d)
	}
	c, _ := Confinement{Writable: []string{l.root}, Protected: []string{l.state}}.Resolve()
	// A clock well past every file time: nothing is too recent to keep
	// (TestRulesRacyNotKept covers the other case). Each change below
	// must then move its directory's change time, which the test checks.
	future := func() unix.Timespec { return unix.NsecToTimespec(1 << 62) }
	kept := &Builder{clock: future}
	defer kept.Close()
	dirs := []string{"work", "outside", "state", "gone", "added", "renamed", "work/sub"}
	step := func(name string, c *Confinement, rebuild bool, lines ...string) {
		t.Helper()
		for attempt := 1; ; attempt++ {
			above, builds := timesDownTo(t, l.root), kept.builds
			got := probed(t, kept, c, l.root, dirs...)
			n := kept.builds - builds
			launched := probedLauncher(t, kept, c, l.root, dirs...)
			want := probed(t, &Builder{Afresh: true}, c, l.root, dirs...)
			if got != want {
				t.Errorf("%s: reused rules differ from rules built afresh:\nreused:\n%s\nafresh:\n%s", name, got, want)
			}
			if launched != want {
				t.Errorf("%s: a launcher handed the kept base layer differs from rules built afresh:\nlauncher:\n%s\nafresh:\n%s", name, launched, want)
			}
			for _, line := range lines {
				if !strings.Contains("\n"+got, "\n"+line+"\n") {
					t.Errorf("%s: the report lacks %q:\n%s", name, line, got)
				}
			}
			switch {
			case rebuild && n == 1, !rebuild && n == 0:
				return
			case !rebuild && attempt < 5 && !slices.Equal(above, timesDownTo(t, l.root)):
				continue // changed above the test's root: rightly rebuilt
			default:
				t.Errorf("%s: %d base layers built, want %d", name, n, map[bool]int{true: 1}[rebuild])
				return
			}
		}
	}
	step("first", &c, true, "work rw", "outside rw", "gone rw", "state --")
	step("unchanged", &c, false, "work rw", "outside rw", "state --")

	before := kept.last.seen[len(kept.last.seen)-1]
	if before.path != l.root {
		t.Fatalf("the last directory listed is %s, want %s", before.path, l.root)
	}
	mkdirF(t, filepath.Join(l.root, "added"))
	if err := os.Rename(l.outside, filepath.Join(l.root, "renamed")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(l.root, "gone")); err != nil {
		t.Fatal(err)
	}
	if ctime(t, l.root) == before.ctime {
		t.Fatal("the directory's change time did not move with its entries (changed within one tick of a coarse file system clock): the Builder's racy check keeps no layer then, and this test's fixed clock cannot show reuse")
	}
	step("after add, rename and remove", &c, true, "added rw", "renamed rw", "state --")

	mkdirF(t, filepath.Join(l.work, "sub"))
	step("after a change beneath an entry", &c, false, "work/sub rw")

	narrow, _ := Confinement{Writable: []string{l.work}, Protected: []string{l.state}}.Resolve()
	step("another confinement, same protected set", &narrow, false, "work rw", "added r-", "state --")
}

// TestRulesRacyNotKept: a base layer built while a listed directory's
// change time is within the racy margin of the clock is used but not
// kept; Afresh keeps none either.
func TestRulesRacyNotKept(t *testing.T) {
	needLandlock(t, 3)
	l := newLayout(t)
	c, _ := Confinement{Writable: []string{l.work}, Protected: []string{l.state}}.Resolve()
	for _, b := range []*Builder{
		{clock: func() unix.Timespec { return unix.Timespec{} }}, // every change is recent
		{Afresh: true},
	} {
		for range 2 {
			ls, err := b.layers(&c, KernelABI(), -1)
			if err != nil {
				t.Fatal(err)
			}
			closeLayers(ls)
		}
		if b.builds != 2 || b.last != nil {
			t.Errorf("afresh=%v: %d base layers built for 2 rulesets (kept %v), want 2 and none kept", b.Afresh, b.builds, b.last != nil)
		}
	}
}

// TestIsRuleset: only a Landlock ruleset is taken as a handed base layer;
// another anonymous inode (an eventfd), a file, a closed descriptor and
// the standard streams are not (the base layer is then built instead).
func TestIsRuleset(t *testing.T) {
	needLandlock(t, 1)
	rs, _, err := (&Confinement{Writable: []string{"/"}}).config(KernelABI()).NewRulesetFD()
	if err != nil || rs < 0 {
		t.Fatalf("ruleset: %d %v", rs, err)
	}
	defer unix.Close(rs)
	ev, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ev)
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	closed, _ := unix.Dup(ev)
	unix.Close(closed)
	for _, tc := range []struct {
		name string
		fd   int
		want bool
	}{{"ruleset", rs, true}, {"eventfd", ev, false}, {"file", int(f.Fd()), false}, {"closed", closed, false}} {
		if got := isRuleset(tc.fd); got != tc.want {
			t.Errorf("%s: isRuleset = %v, want %v", tc.name, got, tc.want)
		}
		c := &Confinement{Base: tc.fd}
		c.BaseFor = digest(c.baseKey(KernelABI()))
		if got := c.takeBase(KernelABI()); (got >= 0) != tc.want {
			t.Errorf("%s: takeBase = %d", tc.name, got)
		}
	}
	if got := (&Confinement{Base: 2}).takeBase(KernelABI()); got != -1 {
		t.Errorf("a standard stream taken as the base layer: %d", got)
	}
}

// TestBaseLayerHand: a base layer names itself only in a confinement with
// the protected set (and handled rights) it was built for; any other is
// refused with ErrBaseMismatch. The confinement it names it in says so
// (BaseFor), whatever its writable roots and network.
func TestBaseLayerHand(t *testing.T) {
	needLandlock(t, 3)
	l := newLayout(t)
	b := &Builder{}
	defer b.Close()
	c, _ := Confinement{Writable: []string{l.work}, Protected: []string{l.state}}.Resolve()
	base, err := b.Base(&c, KernelABI())
	if err != nil || base == nil {
		t.Fatalf("no base layer: %v", err)
	}
	defer base.Close()
	wider, _ := Confinement{Writable: []string{l.root}, Protected: []string{l.state}, Network: NetworkNone}.Resolve()
	for _, ok := range []*Confinement{&c, &wider} {
		run, err := base.Hand(ok, 7)
		if err != nil || run.Base != 7 || run.BaseFor != digest(ok.baseKey(KernelABI())) || ok.Base != 0 {
			t.Errorf("Hand(%v) = %+v, %v; want a copy naming descriptor 7", ok.Writable, run, err)
		}
	}
	other, _ := Confinement{Writable: []string{l.work}, Protected: []string{l.outside}}.Resolve()
	more, _ := Confinement{Writable: []string{l.work}, Protected: []string{l.state, l.outside}}.Resolve()
	for _, bad := range []*Confinement{&other, &more} {
		if run, err := base.Hand(bad, 7); !errors.Is(err, ErrBaseMismatch) {
			t.Errorf("Hand(protected %v) = %+v, %v; want ErrBaseMismatch", bad.Protected, run, err)
		}
	}
}

// TestLauncherHandedRuleset runs a real launcher handed a ruleset at
// descriptor 4 by its own path (Wrap's argv, the descriptor inherited) and
// probes what its command reaches: a ruleset granting nothing named as
// the base layer of its confinement is used (nothing can be executed,
// exit 126); one named without BaseFor, or built for another protected
// set and named as that one's, is not used (the launcher builds the base
// layer itself: the protected directory stays out of reach, the other
// set's is reachable) and does not reach the command; a descriptor that
// is no ruleset is ignored.
func TestLauncherHandedRuleset(t *testing.T) {
	needLandlock(t, 3)
	l := newLayout(t)
	for _, d := range []string{l.work, l.outside} {
		if err := os.WriteFile(filepath.Join(d, "f"), []byte("readable\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := Confinement{Writable: []string{l.work}, Protected: []string{l.state}}.Resolve()
	label := digest(c.baseKey(KernelABI()))
	denyAll := func(t *testing.T) *os.File {
		fd, _, err := landlock.Config{HandledAccessFS: landlock.AccessFSSet(ll.AccessFSExecute | ll.AccessFSReadFile)}.NewRulesetFD()
		if err != nil || fd < 0 {
			t.Fatalf("ruleset: %d %v", fd, err)
		}
		return os.NewFile(uintptr(fd), "deny-all")
	}
	other := &Builder{}
	defer other.Close()
	otherC, _ := Confinement{Writable: []string{l.work}, Protected: []string{l.outside}}.Resolve()
	otherBase := func(t *testing.T) *os.File {
		base, err := other.Base(&otherC, KernelABI())
		if err != nil || base == nil {
			t.Fatalf("no base layer: %v", err)
		}
		return base.File()
	}
	notRuleset := func(t *testing.T) *os.File {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	script := `cat state/exec-approvals.json; cat outside/f; readlink /proc/$$/fd/4; echo ok > work/g`
	for _, tc := range []struct {
		name    string
		handed  func(*testing.T) *os.File
		baseFor string
		used    bool
	}{
		{"deny-all, named as this confinement's", denyAll, label, true},
		{"deny-all, named without BaseFor", denyAll, "", false},
		{"built for another protected set, named as that one's", otherBase, digest(otherC.baseKey(KernelABI())), false},
		{"not a ruleset", notRuleset, label, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(filepath.Join(l.work, "g"))
			handed := tc.handed(t)
			defer handed.Close()
			run := c
			run.Base, run.BaseFor = 4, tc.baseFor
			out, err := launchHanded(t, &run, handed, l.root, "/bin/sh", "-c", script)
			_, werr := os.Stat(filepath.Join(l.work, "g"))
			var exit *exec.ExitError
			if tc.used {
				if !errors.As(err, &exit) || exit.ExitCode() != 126 || werr == nil {
					t.Errorf("the handed ruleset was not used (it grants no execution): %v %q", err, out)
				}
				return
			}
			if err != nil || werr != nil {
				t.Fatalf("the run failed: %v %v %q", err, werr, out)
			}
			if strings.Contains(out, "version") || strings.Contains(out, "landlock") {
				t.Errorf("the protected file, or the handed ruleset's descriptor, reached the command: %q", out)
			}
			if !strings.Contains(out, "readable") {
				t.Errorf("the other set's file is out of reach: its base layer was used: %q", out)
			}
		})
	}
}
