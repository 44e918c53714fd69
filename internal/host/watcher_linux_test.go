package host

import (
	"testing"

	"github.com/exechost/exechost/internal/fschange"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/testdep"
)

// TestEngineTakesItsWatcher: the Watcher an engine is given is the one
// its caches use: the approvals file's Set is the given Watcher's (its
// poll vouches for it, another Watcher's never does), and the analysis
// the engine builds takes it too. No process-wide Watcher vouches for an
// engine's caches.
func TestEngineTakesItsWatcher(t *testing.T) {
	f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/hello")
	if _, ok := fschange.New().Watch([]string{f.store.Path}); !ok {
		testdep.Missing(t, "a watchable file system", "cannot watch "+f.store.Path+" here (not a local file system, or inotify limits)")
	}
	w := fschange.New()
	f.engine.Watcher = w
	for range 2 { // read and watched, then answered from the caches
		if _, err := f.engine.Prepare(Request{RawCommand: "hello x", Cwd: f.dir}); err != nil {
			t.Fatal(err)
		}
	}
	f.engine.mu.Lock()
	set := f.engine.cache.watched
	f.engine.mu.Unlock()
	if !set.Valid() {
		t.Fatal("the approvals file is not watched though it can be, so this test proves nothing")
	}
	if !w.Poll().Unchanged(set) {
		t.Error("the engine's Watcher does not vouch for the approvals file's Set: another Watcher took it")
	}
	if fschange.New().Poll().Unchanged(set) {
		t.Error("a Watcher the engine was not given vouches for its Set")
	}
	if got := f.engine.analyzer().Watcher(); got != w {
		t.Errorf("the engine's analysis watches with %p, not the engine's Watcher %p", got, w)
	}
}
