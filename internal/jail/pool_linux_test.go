package jail

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/confine"
)

func newPool(t *testing.T, opts ...PoolOption) *Pool {
	t.Helper()
	p, err := NewPool(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// A policy change is another key: the run after it gets a new jail built
// for the new confinement, never the old one.
func TestPolicyChangeNeverRunsStale(t *testing.T) {
	p := newPool(t)
	a, b := outsideDir(t), outsideDir(t)
	oldJ, rel1, err := p.Get(Options{Confine: confine.Confinement{Writable: []string{a}}})
	if err != nil {
		t.Fatal(err)
	}
	defer rel1()
	if r := sh(t, oldJ, a, "echo x > f"); r.code() != 0 {
		t.Fatalf("old policy: write in its root failed: %q", r.stderr)
	}
	newJ, rel2, err := p.Get(Options{Confine: confine.Confinement{Writable: []string{b}}})
	if err != nil {
		t.Fatal(err)
	}
	defer rel2()
	if newJ == oldJ || newJ.Key() == oldJ.Key() {
		t.Fatal("a changed confinement got the old jail")
	}
	if r := sh(t, newJ, "/", "echo y > "+filepath.Join(a, "g")); r.code() == 0 {
		t.Fatal("new policy: the old policy's root is still writable")
	}
	again, rel3, err := p.Get(Options{Confine: confine.Confinement{Writable: []string{b}}})
	if err != nil {
		t.Fatal(err)
	}
	rel3()
	if again != newJ {
		t.Fatal("the same confinement did not reuse its jail")
	}
}

// At most Max jails stand: the least recently used unused one goes.
func TestPoolEvictsLeastRecentlyUsed(t *testing.T) {
	p := newPool(t, WithMax(1))
	j1, rel1, err := p.Get(Options{Confine: confine.Confinement{Writable: []string{outsideDir(t)}}})
	if err != nil {
		t.Fatal(err)
	}
	// In use: a second jail does not evict it.
	_, rel2, err := p.Get(Options{Confine: confine.Confinement{Writable: []string{outsideDir(t)}}})
	if err != nil {
		t.Fatal(err)
	}
	if !j1.Alive() {
		t.Fatal("a jail in use was evicted")
	}
	rel1() // unused and over max: it goes, the one in use stays
	waitDead(t, j1)
	rel2()
	if n := p.Len(); n != 1 {
		t.Fatalf("%d jails stand, want 1", n)
	}
}

// An idle jail is reaped, by the pool's clock.
func TestPoolReapsIdle(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	p := newPool(t, WithIdle(time.Minute), WithClock(clock))
	j, rel, err := p.Get(Options{Confine: confine.Confinement{Writable: []string{outsideDir(t)}}})
	if err != nil {
		t.Fatal(err)
	}
	rel()
	if n := p.Reap(); n != 0 {
		t.Fatalf("reaped %d fresh jails", n)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	if n := p.Reap(); n != 1 {
		t.Fatalf("reaped %d, want 1", n)
	}
	waitDead(t, j)
}

func waitDead(t *testing.T, j *Jail) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); j.Alive(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("jail still alive after 10s")
		}
	}
}

// Killing a run kills every process it left (its pid namespace); without
// the pid layer an orphan outlives the kill (the control).
func TestKillTakesTheWholeRun(t *testing.T) {
	for _, tc := range []struct {
		layers  []confine.Layer
		survive bool
	}{{[]confine.Layer{}, true}, {[]confine.Layer{confine.LayerPID}, false}} {
		w := outsideDir(t)
		marker := filepath.Join(w, "marker")
		j := jailFor(t, confine.Confinement{Writable: []string{w}}, tc.layers)
		null, _ := os.Open(os.DevNull)
		p, err := j.Start(Request{Argv: []string{"/bin/sh", "-c", "(sleep 1; touch " + marker + ") & sleep 100"}, Env: []string{"PATH=/usr/bin:/bin"},
			Stdin: int(null.Fd()), Stdout: int(null.Fd()), Stderr: int(null.Fd()), Exec: -1})
		null.Close()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // the background job has started
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		st, err := p.Wait(10 * time.Second)
		p.Close()
		if err != nil || !st.Signaled() {
			t.Fatalf("layers %v: wait: %v, status %v", tc.layers, err, st)
		}
		time.Sleep(1500 * time.Millisecond)
		_, err = os.Stat(marker)
		if survived := err == nil; survived != tc.survive {
			t.Errorf("layers %v: an orphan survived=%v, want %v", tc.layers, survived, tc.survive)
		}
	}
}

// The pinned file runs only if the file at its path in the view is the
// one decided on: what was decided on is what runs.
func TestExecByDescriptor(t *testing.T) {
	w := outsideDir(t)
	f, err := os.Open("/bin/echo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	j := jailFor(t, confine.Confinement{Writable: []string{w}}, nil)
	pr, pw, _ := os.Pipe()
	null, _ := os.Open(os.DevNull)
	if _, err := j.Start(Request{Argv: []string{"/bin/true"}, Stdin: int(null.Fd()), Stdout: int(null.Fd()), Stderr: int(null.Fd()), Exec: int(f.Fd())}); err == nil {
		t.Fatal("another file than the one decided on started")
	}
	p, err := j.Start(Request{Argv: []string{"/bin/echo", "pinned"}, Stdin: int(null.Fd()), Stdout: int(pw.Fd()), Stderr: int(null.Fd()), Exec: int(f.Fd())})
	pw.Close()
	null.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if st, err := p.Wait(10 * time.Second); err != nil || st.ExitStatus() != 0 {
		t.Fatalf("wait: %v %v", err, st)
	}
	b := make([]byte, 64)
	n, _ := pr.Read(b)
	if string(b[:n]) != "pinned\n" {
		t.Fatalf("output %q", b[:n])
	}
}

// A jail's Landlock layer grants a directory above a protected path entry
// by entry, as the entries were when it was built: the pool builds a new
// jail once such a directory changes, so an entry made there later is
// readable. The control reuses the old jail and is refused.
func TestNewEntryBesideProtectedIsReadable(t *testing.T) {
	for _, trust := range []bool{true, false} {
		p := newPool(t)
		p.trustListed = trust
		home, work := outsideDir(t), outsideDir(t)
		secret := filepath.Join(home, ".ssh")
		if err := os.Mkdir(secret, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(secret, "id_ed25519"), []byte("KEY\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		o := Options{Confine: confine.Confinement{Writable: []string{work}, Protected: []string{secret}}}
		// Built once the directories are older than the racy window,
		// as a user's home is.
		time.Sleep(2 * racyWindow)
		j1, rel1, err := p.Get(o)
		if err != nil {
			t.Fatal(err)
		}
		rel1()
		again, rel, err := p.Get(o)
		if err != nil {
			t.Fatal(err)
		}
		rel()
		if again != j1 {
			t.Fatalf("trust=%v: an unchanged home did not reuse its jail", trust)
		}
		if err := os.MkdirAll(filepath.Join(home, "project"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, "project", "README"), []byte("hello\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		j2, rel2, err := p.Get(o)
		if err != nil {
			t.Fatal(err)
		}
		r := run(t, j2, work, "/bin/cat", filepath.Join(home, "project", "README"))
		rel2()
		if trust {
			if j2 != j1 || r.code() == 0 {
				t.Fatalf("control (listing trusted): same jail %v, cat exit %d: the stale jail should refuse the new entry", j2 == j1, r.code())
			}
			continue
		}
		if j2 == j1 {
			t.Fatal("the home changed, and the old jail was reused")
		}
		if r.code() != 0 || r.stdout != "hello\n" {
			t.Fatalf("a new entry beside a protected path: exit %d, %q %q", r.code(), r.stdout, r.stderr)
		}
		if r := run(t, j2, work, "/bin/cat", filepath.Join(secret, "id_ed25519")); r.code() == 0 || strings.Contains(r.stdout, "KEY") {
			t.Fatalf("the protected directory became readable: %q", r.stdout)
		}
		waitDead(t, j1) // left the pool unused: closed
	}
}
