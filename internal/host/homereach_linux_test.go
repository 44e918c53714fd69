package host

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/fschange"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/testdep"
)

// worked is how many times the engine has worked out a homeReach.
func (j *jailFixture) worked() int { return j.engine.homes.workedOut() }

// workedOut is how many results h has worked out.
func (h *memos[T]) workedOut() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.worked
}

// watchElsewhere has every result h keeps vouched for by a watch on an
// unrelated directory instead of its own: a test's control, which shows
// that what it checks is the kept result being worked out again. The
// directory is made with the fixture (quietJailFixture): a watch covers
// its ancestors too, and one made now would be a new entry in a directory
// the kept results look in.
func watchElsewhere[T any](t *testing.T, h *memos[T], w *fschange.Watcher, elsewhere string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.m {
		sets, ok := (&lookups{names: []string{elsewhere}}).watch(w)
		if !ok {
			t.Fatal("cannot watch the control's directory")
		}
		m.sets = sets
	}
}

// keptBy runs fn until worked (a memos' count) says the kept result was
// handed out (no more workings-out than before fn), at most five times:
// an unrelated entry made meanwhile in a directory the result looks in
// (its ancestors too) is a change, and works it out again, rightly.
func keptBy(worked func() int, fn func()) bool {
	for range 5 {
		before := worked()
		fn()
		if worked() == before {
			return true
		}
	}
	return false
}

// TestHomeReachFollowsTheHome: a run's hidden set, kept between runs,
// follows every change to what it was worked out from — a new secret
// directory, a secret created beneath a directory that did not exist, an
// entry replaced by a link, a new key in a directory carved for a
// readable file, a persistence path that appears — and is not worked out
// again while nothing changed.
func TestHomeReachFollowsTheHome(t *testing.T) {
	j := quietJailFixture(t, policy.SecurityAllowlist)
	// The runs' temporary directories are the test's own.
	t.Setenv("TMPDIR", t.TempDir())
	home := func(rel string) string { return filepath.Join(j.home, rel) }
	hidden := func() []string { return only(j.jailOf(t, j.repo).Hidden, j.home) }

	first := hidden()
	if !j.kept(func() {
		if again := hidden(); !slices.Equal(again, first) {
			t.Fatalf("unchanged home: hidden %q, then %q", first, again)
		}
	}) {
		t.Fatal("unchanged home: the hidden set was worked out again each time")
	}

	for _, step := range []struct {
		name   string
		change func()
		want   string // now hidden
	}{
		{"new secret directory", func() { mkfiles(t, j.home, ".gnupg/secring.gpg") }, ".gnupg"},
		{"beneath a directory that did not exist", func() { mkfiles(t, j.home, ".local/share/keyrings/login.keyring") }, ".local/share/keyrings"},
		{"an entry replaced by a link", func() {
			mkfiles(t, j.home, "vault/token")
			if err := os.Remove(home(".netrc")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(home("vault"), home(".netrc")); err != nil {
				t.Fatal(err)
			}
		}, "vault"},
	} {
		before := j.worked()
		step.change()
		got := hidden()
		if !slices.Contains(got, home(step.want)) {
			t.Errorf("%s: hidden %q lacks %s", step.name, got, step.want)
		}
		if j.worked() == before {
			t.Errorf("%s: the kept hidden set was handed out after a change", step.name)
		}
	}

	// A readable file inside ~/.ssh: the directory is hidden entry by
	// entry, so a new entry is a change too.
	j.setConfine(t, &approvals.Confine{Readable: []string{"~/.ssh/known_hosts"}})
	if got := hidden(); !slices.Contains(got, home(".ssh/id_ed25519")) || slices.Contains(got, home(".ssh")) {
		t.Fatalf("carved: hidden %q", got)
	}
	mkfiles(t, j.home, ".ssh/id_new")
	if got := hidden(); !slices.Contains(got, home(".ssh/id_new")) {
		t.Errorf("a key added beside a readable file: hidden %q lacks it", got)
	}

	// Only a readable file in ~/.kube: its listing is all that covers
	// the directory's entries.
	mkfiles(t, j.home, ".kube/config")
	j.setConfine(t, &approvals.Confine{Readable: []string{"~/.kube/config"}})
	if got := hidden(); slices.ContainsFunc(got, func(p string) bool { return pathWithin(p, home(".kube")) }) {
		t.Fatalf("only the readable file in ~/.kube: hidden %q", got)
	}
	mkfiles(t, j.home, ".kube/cache-token")
	if got := hidden(); !slices.Contains(got, home(".kube/cache-token")) {
		t.Errorf("an entry added beside the only readable file: hidden %q lacks it", got)
	}

	// A persistence path that appears (with ~ writable) is read-only in
	// the next run.
	j.setConfine(t, &approvals.Confine{Writable: []string{"~"}})
	mkfiles(t, j.home, ".config/systemd/")
	j.jailOf(t, j.repo)
	mkfiles(t, j.home, ".config/systemd/user/")
	if ro := j.jailOf(t, j.repo).ReadOnly; !slices.Contains(ro, home(".config/systemd/user")) {
		t.Errorf("read-only %q lacks the new ~/.config/systemd/user", ro)
	}
}

// TestHomeReachCoolsWhileItNeverHolds: a hidden set whose watches change
// before it is handed out kept once (a home that changes all the time) is
// worked out without watches for the next memoCooling runs, then watched
// and kept again.
func TestHomeReachCoolsWhileItNeverHolds(t *testing.T) {
	j := quietJailFixture(t, policy.SecurityAllowlist)
	t.Setenv("TMPDIR", t.TempDir())
	j.jailOf(t, j.repo) // seen: its look-ups are what the next run watches
	j.jailOf(t, j.repo) // watched, kept
	mkfiles(t, j.home, "churn")
	for i := range memoCooling + 1 {
		before := j.worked()
		j.jailOf(t, j.repo)
		if j.worked() != before+1 {
			t.Fatalf("run %d while cooling: worked out %d times, want once", i, j.worked()-before)
		}
	}
	if !j.kept(func() { j.jailOf(t, j.repo) }) {
		t.Error("after cooling the hidden set is never kept again")
	}
}

// TestHomeReachConcurrentRuns: runs working out their jails at once,
// while the home changes, each get a hidden set, and the first run after
// the last change hides what it made.
func TestHomeReachConcurrentRuns(t *testing.T) {
	j := newJailFixture(t, policy.SecurityAllowlist)
	t.Setenv("TMPDIR", t.TempDir())
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				p, err := j.engine.Prepare(Request{RawCommand: "marker x", Cwd: j.repo})
				if err != nil {
					t.Error(err)
					return
				}
				if c := j.engine.confinement(p, ""); !slices.Contains(c.Hidden, filepath.Join(j.home, ".ssh")) {
					t.Errorf("hidden %q lacks ~/.ssh", c.Hidden)
					return
				}
			}
		})
	}
	for i := range 20 {
		mkfiles(t, j.home, ".gnupg/key"+strconv.Itoa(i))
	}
	wg.Wait()
	if got := j.jailOf(t, j.repo).Hidden; !slices.Contains(got, filepath.Join(j.home, ".gnupg")) {
		t.Errorf("after the changes: hidden %q lacks ~/.gnupg", got)
	}
}

// quietDir is a directory for a fixture that must see it from a run or
// be kept: beneath the user's cache directory, which the jail's view
// shows (a run's /tmp is the view's own) and where nothing else makes
// entries while the test runs. A kept result watches every directory its
// look-ups read, the fixture's parents among them, and the tests of other
// packages make entries in /tmp all the time.
func quietDir(t *testing.T) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		testdep.Missing(t, "a user cache directory", err.Error())
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(cache, "exechost-homereach-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// quietJailFixture is newJailFixture with its home and repository in a
// quietDir, beside the directory a control watches (elsewhere).
func quietJailFixture(t *testing.T, sec policy.Security) *jailFixture {
	t.Helper()
	j := newJailFixture(t, sec)
	dir := quietDir(t)
	j.elsewhere = filepath.Join(dir, "elsewhere")
	if err := os.Mkdir(j.elsewhere, 0o700); err != nil {
		t.Fatal(err)
	}
	j.homeAndRepo(t, dir)
	return j
}

// quietJail is a fixture whose runs are confined (security=full with a
// confine member) with a quiet home (quietJailFixture), and a cwd for them
// beside it holding files (mkfiles).
func quietJail(t *testing.T, files ...string) (*jailFixture, string) {
	t.Helper()
	j := quietJailFixture(t, policy.SecurityFull)
	work := filepath.Join(filepath.Dir(j.home), "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	mkfiles(t, work, files...)
	j.setConfine(t, &approvals.Confine{})
	return j, work
}

// kept runs fn until the kept hidden set is handed out (keptBy).
func (j *jailFixture) kept(fn func()) bool { return keptBy(j.worked, fn) }

// TestNewSecretHiddenFromTheNextRun runs the attack for real: a secret
// that appears in the home after runs were confined is out of sight of
// the next run (`cat` finds nothing), while a plain file made beside it
// is read. The control keeps the earlier hidden set vouched for by
// watches on an unrelated directory: the same run prints the secret, so
// what hides it is that the kept set is worked out again when the home
// changes.
func TestNewSecretHiddenFromTheNextRun(t *testing.T) {
	needABI(t, 4)
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "watched", true: "control: watches elsewhere"}[control], func(t *testing.T) {
			j, work := quietJail(t)
			run := func(text string) string {
				t.Helper()
				res, err := j.engine.Run(context.Background(), Request{RawCommand: text, Cwd: work})
				if err != nil {
					t.Fatal(err)
				}
				return res.Stdout
			}
			if out := run("cat " + filepath.Join(j.home, ".netrc") + " " + filepath.Join(j.home, "docs", "readme")); out != "x" {
				t.Fatalf("first run: %q, want only the readme's x", out)
			}
			if !j.kept(func() { run("true") }) {
				t.Fatal("every run worked the hidden set out again: nothing is kept")
			}
			if control {
				watchElsewhere(t, &j.engine.homes, j.engine.watcher(), j.elsewhere)
			}
			mkfiles(t, j.home, "docs/notes")
			secret := filepath.Join(j.home, ".gnupg", "private-keys")
			if err := os.MkdirAll(filepath.Dir(secret), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(secret, []byte("SECRET-KEY-MATERIAL\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			out := run("cat " + filepath.Join(j.home, "docs", "notes") + " " + secret)
			if !strings.HasPrefix(out, "x") {
				t.Fatalf("the run cannot read a new plain file in the home: %q", out)
			}
			if got := strings.Contains(out, "SECRET-KEY-MATERIAL"); got != control {
				t.Errorf("the run read the new secret = %v, want %v: %q", got, control, out)
			}
		})
	}
}
