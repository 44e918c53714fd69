package shellcmd

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/exechost/exechost/internal/fschange"
	"github.com/exechost/exechost/internal/testdep"
)

// TestAnalyzerTakesItsWatcher: the memo's watches are taken by the
// Watcher the Analyzer is given (its poll vouches for them, another's
// never does), and two Analyzers given none share no Watcher: nothing
// process-wide vouches for every cache.
func TestAnalyzerTakesItsWatcher(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "tool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	w := fschange.New()
	if _, ok := w.WatchStat([]string{bin}); !ok {
		testdep.Missing(t, "a watchable file system", "cannot watch "+root+" here (not a local file system, or inotify limits)")
	}
	z := New(Options{Watcher: w})
	if z.Watcher() != w {
		t.Fatal("the Analyzer does not keep the Watcher it was given")
	}
	env := Env{Cwd: root, PATH: bin, Home: root}
	for range 2 {
		if a := z.Analyze("tool x", env); !a.OK {
			t.Fatalf("analysis refused: %+v", a)
		}
	}
	set := z.memoWatch(t, "tool x", env)
	if !set.Valid() {
		t.Fatal("the memo entry is not watched, so this test proves nothing")
	}
	if !w.Poll().Unchanged(set) {
		t.Error("the given Watcher does not vouch for the memo's Set: another Watcher took it")
	}
	if fschange.New().Poll().Unchanged(set) {
		t.Error("a Watcher the Analyzer was not given vouches for its memo")
	}
	if a, b := New(Options{}), New(Options{}); a.Watcher() == nil || a.Watcher() == b.Watcher() {
		t.Errorf("Analyzers given no Watcher share one (%p, %p)", a.Watcher(), b.Watcher())
	}
}
