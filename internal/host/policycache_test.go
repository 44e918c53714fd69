package host

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/fschange"
	"github.com/exechost/exechost/internal/policy"
)

// TestPolicyCacheSeesSameTickEdit edits exec-approvals.json in place
// (same inode, same size) and puts its mtime back, as a second write within
// the same timestamp tick leaves it. While the file is younger than
// policyRacyWindow the engine must not have cached it, so the edit is seen;
// once it is older, an edit sets a new mtime and is seen through the key.
func TestPolicyCacheSeesSameTickEdit(t *testing.T) {
	forWatchedAndNot(t, testPolicyCacheSeesSameTickEdit)
}

// forWatchedAndNot runs test with the approvals file watched (package
// fschange vouching for the cache) and as where it cannot be (the stat key
// and the byte comparison deciding).
func forWatchedAndNot(t *testing.T, test func(t *testing.T, watch func([]string) (fschange.Set, bool))) {
	t.Run("watched", func(t *testing.T) { test(t, nil) })
	t.Run("not watched", func(t *testing.T) {
		test(t, func([]string) (fschange.Set, bool) { return fschange.Set{}, false })
	})
}

func testPolicyCacheSeesSameTickEdit(t *testing.T, watch func([]string) (fschange.Set, bool)) {
	for _, tc := range []struct {
		name string
		age  time.Duration // how old the engine's clock says the file is
	}{
		{"fresh file is not cached", policyRacyWindow / 4},
		{"old file: the edit's new mtime is seen", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, policy.SecurityFull, policy.AskOff, policy.FallbackDeny)
			f.engine.WatchApprovals = watch
			path := f.store.Path
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			mtime := fi.ModTime()
			if tc.age > 0 {
				f.engine.Now = func() time.Time { return mtime.Add(tc.age) }
			} else {
				f.engine.Now = func() time.Time { return mtime.Add(policyRacyWindow + time.Second) }
			}
			req := Request{RawCommand: "hello", Cwd: f.dir}
			if p, err := f.engine.Prepare(req); err != nil || p.Decision.Outcome != policy.Allow {
				t.Fatalf("before the edit: %+v, %v; want allow", p.Decision, err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			edited := bytes.Replace(data, []byte(`"full"`), []byte(`"deny"`), 1)
			if bytes.Equal(edited, data) {
				t.Fatalf("no security \"full\" in %s", data)
			}
			if err := os.WriteFile(path, edited, 0o600); err != nil { // in place: same inode and size
				t.Fatal(err)
			}
			if tc.age > 0 {
				// The same tick as the state the engine read.
				if err := os.Chtimes(path, mtime, mtime); err != nil {
					t.Fatal(err)
				}
			} else {
				// A later write: a new mtime, as the kernel sets it.
				later := mtime.Add(policyRacyWindow + 2*time.Second)
				if err := os.Chtimes(path, later, later); err != nil {
					t.Fatal(err)
				}
				f.engine.Now = func() time.Time { return later.Add(policyRacyWindow + time.Second) }
			}
			if p, err := f.engine.Prepare(req); err == nil && p.Decision.Outcome == policy.Allow {
				t.Fatalf("after the edit to security deny the engine still allows: %+v", p.Decision)
			}
		})
	}
}

// TestPolicyCacheKeepsUnchangedFreshFile: a file younger than
// policyRacyWindow (as a busy host's is, its lastUsedAt stamps rewritten
// every UsageFlushDelay) is read on every decision but parsed again only
// when its bytes differ from the cached ones — also after an atomic
// rewrite with the same content (a new inode and mtime).
func TestPolicyCacheKeepsUnchangedFreshFile(t *testing.T) {
	forWatchedAndNot(t, testPolicyCacheKeepsUnchangedFreshFile)
}

func testPolicyCacheKeepsUnchangedFreshFile(t *testing.T, watch func([]string) (fschange.Set, bool)) {
	f := newFixture(t, policy.SecurityFull, policy.AskOff, policy.FallbackDeny)
	f.engine.WatchApprovals = watch
	path := f.store.Path
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f.engine.Now = func() time.Time { return fi.ModTime().Add(policyRacyWindow / 4) }
	first, err := f.engine.loadApprovals()
	if err != nil {
		t.Fatal(err)
	}
	if again, err := f.engine.loadApprovals(); err != nil || again != first {
		t.Fatalf("unchanged fresh file parsed again (%p then %p, %v)", first, again, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if again, err := f.engine.loadApprovals(); err != nil || again != first {
		t.Fatalf("same bytes under a new inode parsed again (%p then %p, %v)", first, again, err)
	}
	edited := bytes.Replace(data, []byte(`"full"`), []byte(`"deny"`), 1)
	if err := os.WriteFile(path, edited, 0o600); err != nil {
		t.Fatal(err)
	}
	changed, err := f.engine.loadApprovals()
	if err != nil || changed == first {
		t.Fatalf("edited file not parsed again (%v)", err)
	}
	if got := changed.Defaults.Security; got != "deny" {
		t.Fatalf("after the edit: security %q, want deny", got)
	}
}

// TestPolicyCacheBacksOffUnwatchable: where the file cannot be watched (a
// network file system), a decision does not try again on every load: the
// rewatchUnwatchable loads after a refused try skip it, and every edit is
// still seen.
func TestPolicyCacheBacksOffUnwatchable(t *testing.T) {
	tries := 0
	f := newFixture(t, policy.SecurityFull, policy.AskOff, policy.FallbackDeny)
	f.engine.WatchApprovals = func([]string) (fschange.Set, bool) { tries++; return fschange.Set{}, false }
	first, err := f.engine.loadApprovals()
	if err != nil {
		t.Fatal(err)
	}
	for range rewatchUnwatchable {
		if _, err := f.engine.loadApprovals(); err != nil {
			t.Fatal(err)
		}
	}
	if tries != 1 {
		t.Errorf("%d loads tried to watch %d times, want once", rewatchUnwatchable+1, tries)
	}
	if _, err := f.engine.loadApprovals(); err != nil {
		t.Fatal(err)
	}
	if tries != 2 {
		t.Errorf("after %d loads watching was tried %d times, want a second try", rewatchUnwatchable+2, tries)
	}
	data, err := os.ReadFile(f.store.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.store.Path, bytes.Replace(data, []byte(`"full"`), []byte(`"deny"`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	changed, err := f.engine.loadApprovals()
	if err != nil || changed == first || changed.Defaults.Security != "deny" {
		t.Fatalf("edit not seen while unwatched: %+v, %v", changed.Defaults, err)
	}
}
