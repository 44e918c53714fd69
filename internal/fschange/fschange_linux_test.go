package fschange

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/exechost/exechost/internal/testdep"
)

// TestWatchSeesEveryChange takes a Set over a path, makes one kind of
// change to something a lookup of it reads, and checks the Set reports it;
// and checks a change to something it does not read is not reported.
func TestWatchSeesEveryChange(t *testing.T) {
	x := New() // the test owns its watches
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Every case watches root/a/link/bin/tool, where link -> d1 and
	// d1/bin/tool is an executable; other holds a hard link to it.
	cases := []struct {
		name   string
		change func(t *testing.T, root string)
		seen   bool
	}{
		{"chmod the file", func(t *testing.T, r string) { must(t, os.Chmod(filepath.Join(r, "a/d1/bin/tool"), 0o644)) }, true},
		{"chmod the file through a hard link elsewhere", func(t *testing.T, r string) { must(t, os.Chmod(filepath.Join(r, "other/tool"), 0o644)) }, true},
		{"remove the file", func(t *testing.T, r string) { must(t, os.Remove(filepath.Join(r, "a/d1/bin/tool"))) }, true},
		{"rename another file over it", func(t *testing.T, r string) {
			must(t, os.WriteFile(filepath.Join(r, "x"), nil, 0o755))
			must(t, os.Rename(filepath.Join(r, "x"), filepath.Join(r, "a/d1/bin/tool")))
		}, true},
		{"add a file beside it", func(t *testing.T, r string) { must(t, os.WriteFile(filepath.Join(r, "a/d1/bin/new"), nil, 0o755)) }, true},
		{"re-point the symlink on the way", func(t *testing.T, r string) {
			must(t, os.Symlink("d2", filepath.Join(r, "a/link2")))
			must(t, os.Rename(filepath.Join(r, "a/link2"), filepath.Join(r, "a/link")))
		}, true},
		{"rename an ancestor", func(t *testing.T, r string) { must(t, os.Rename(filepath.Join(r, "a"), filepath.Join(r, "a.old"))) }, true},
		{"chmod a directory on the way", func(t *testing.T, r string) { must(t, os.Chmod(filepath.Join(r, "a/d1/bin"), 0o700)) }, true},
		{"change the link target's parent", func(t *testing.T, r string) {
			must(t, os.Rename(filepath.Join(r, "a/d1"), filepath.Join(r, "a/d1.old")))
			must(t, os.Rename(filepath.Join(r, "a/d2"), filepath.Join(r, "a/d1")))
		}, true},
		{"bind-mount over a directory on the way", func(t *testing.T, r string) {
			if os.Getuid() != 0 {
				testdep.Missing(t, "root", "bind-mounting over a watched directory needs CAP_SYS_ADMIN")
			}
			must(t, unix.Mount(filepath.Join(r, "a/d2/bin"), filepath.Join(r, "a/d1/bin"), "", unix.MS_BIND, ""))
			t.Cleanup(func() { unix.Unmount(filepath.Join(r, "a/d1/bin"), unix.MNT_DETACH) })
		}, true},
		{"add a file in an unrelated directory", func(t *testing.T, r string) { must(t, os.WriteFile(filepath.Join(r, "a/d2/bin/new"), nil, 0o755)) }, false},
		{"write into the file", func(t *testing.T, r string) {
			must(t, os.WriteFile(filepath.Join(r, "a/d1/bin/tool"), []byte("#!/bin/sh\n"), 0o755))
		}, false},
	}
	// reported sets the layout up, takes a Set, makes the change and says
	// whether the Set reports a change.
	reported := func(t *testing.T, change func(*testing.T, string)) bool {
		root, err := filepath.EvalSymlinks(t.TempDir())
		must(t, err)
		for _, d := range []string{"a/d1/bin", "a/d2/bin", "other"} {
			must(t, os.MkdirAll(filepath.Join(root, d), 0o755))
		}
		must(t, os.WriteFile(filepath.Join(root, "a/d1/bin/tool"), nil, 0o755))
		must(t, os.WriteFile(filepath.Join(root, "a/d2/bin/tool"), nil, 0o755))
		must(t, os.Link(filepath.Join(root, "a/d1/bin/tool"), filepath.Join(root, "other/tool")))
		must(t, os.Symlink("d1", filepath.Join(root, "a/link")))
		s, ok := x.Watch([]string{filepath.Join(root, "a/link/bin/tool")})
		if !ok {
			testdep.Missing(t, "a watchable file system", fmt.Sprintf("cannot watch %s here (not a local file system, or inotify limits)", root))
		}
		change(t, root)
		return !Unchanged(s)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.seen {
				if !reported(t, tc.change) {
					t.Error("the change was not reported")
				}
				return
			}
			// A change that must not be reported: the temporary directory
			// is watched as an ancestor, and other tests create entries in
			// it at any moment, which a Set rightly reports. One quiet
			// attempt in a few shows the change itself is not reported.
			for range 20 {
				if !reported(t, tc.change) {
					return
				}
			}
			t.Error("the change was reported in every attempt")
		})
	}
}

// TestWatchRefuses checks what Watch will not cover.
func TestWatchRefuses(t *testing.T) {
	x := New() // the test owns its watches
	if _, ok := x.Watch([]string{"relative/path"}); ok {
		t.Error("a relative path was watched")
	}
	if _, ok := x.Watch(nil); ok {
		t.Error("nothing at all was watched")
	}
	if _, ok := x.Watch([]string{"/proc/self/status"}); ok {
		t.Error("a path on /proc (not a local file system) was watched")
	}
	if Unchanged(Set{}) {
		t.Error("the zero Set reports no change")
	}
}

// TestWatchMissingPath watches a path that does not exist yet: its
// creation, or that of a missing directory on the way, is a change.
func TestWatchMissingPath(t *testing.T) {
	x := New() // the test owns its watches
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, ok := x.Watch([]string{filepath.Join(root, "no/such/tool")})
	if !ok {
		testdep.Missing(t, "a watchable file system", "cannot watch the test's temporary directory (not a local file system, or inotify limits)")
	}
	if err := os.Mkdir(filepath.Join(root, "no"), 0o755); err != nil {
		t.Fatal(err)
	}
	if Unchanged(s) {
		t.Error("creating a missing directory on the way was not reported")
	}
}

// TestWatchContent: a write into a file watched for its content is a
// change, as is an atomic replacement of it; a write into a file watched
// for its attributes alone is not (TestWatchSeesEveryChange).
func TestWatchContent(t *testing.T) {
	x := New() // the test owns its watches
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(root, "policy.json")
	for _, change := range []func() error{
		func() error { return os.WriteFile(f, []byte(`{"x":2}`), 0o600) },
		func() error { return os.Truncate(f, 0) },
		func() error {
			if err := os.WriteFile(f+".tmp", []byte(`{"x":3}`), 0o600); err != nil {
				return err
			}
			return os.Rename(f+".tmp", f)
		},
	} {
		if err := os.WriteFile(f, []byte(`{"x":1}`), 0o600); err != nil {
			t.Fatal(err)
		}
		s, ok := x.WatchContent([]string{f})
		if !ok {
			testdep.Missing(t, "a watchable file system", "cannot watch the test's temporary directory (not a local file system, or inotify limits)")
		}
		if err := change(); err != nil {
			t.Fatal(err)
		}
		if Unchanged(s) {
			t.Error("a change to the file's content was not reported")
		}
	}
}

// TestWatchStat: a Set from WatchStat reports what changes a stat of the
// final path (an entry added to a final directory, a write into a final
// file), which a Set from Watch does not; a View from a poll made after
// the change reports it too.
func TestWatchStat(t *testing.T) {
	x := New() // the test owns its watches
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir, file := filepath.Join(root, "dir"), filepath.Join(root, "file")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("a"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		change     func() error
	}{
		{"add an entry to the directory", dir, func() error { return os.WriteFile(filepath.Join(dir, "new"), nil, 0o600) }},
		{"remove an entry from the directory", dir, func() error { return os.Remove(filepath.Join(dir, "new")) }},
		{"make a subdirectory", dir, func() error { return os.Mkdir(filepath.Join(dir, "sub"), 0o755) }},
		{"write into the file", file, func() error { return os.WriteFile(file, []byte("bb"), 0o755) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := x.WatchStat([]string{tc.path})
			if !ok {
				testdep.Missing(t, "a watchable file system", "cannot watch the test's temporary directory (not a local file system, or inotify limits)")
			}
			if err := tc.change(); err != nil {
				t.Fatal(err)
			}
			if x.Poll().Unchanged(s) {
				t.Error("a View polled after the change reports no change")
			}
			if Unchanged(s) {
				t.Error("the change was not reported")
			}
		})
	}
	if (View{}).Unchanged(Set{}) || x.Poll().Unchanged(Set{}) {
		t.Error("the zero Set reports no change")
	}
}

// TestOwnedWatcher: a Watcher of its own answers for its Sets (Unchanged
// and its own View), sees a change, and a View of
// another Watcher never vouches for its Sets.
func TestOwnedWatcher(t *testing.T) {
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	must(t, err)
	file := filepath.Join(root, "f")
	must(t, os.WriteFile(file, nil, 0o644))
	own := New()
	s, ok := own.Watch([]string{file})
	if !ok {
		testdep.Missing(t, "a watchable file system", "cannot watch "+root+" here (not a local file system, or inotify limits)")
	}
	if !Unchanged(s) || !own.Poll().Unchanged(s) {
		t.Fatal("a fresh Set of an owned Watcher reports a change")
	}
	if New().Poll().Unchanged(s) {
		t.Error("another Watcher's View vouches for this Watcher's Set")
	}
	must(t, os.Chmod(file, 0o600))
	if Unchanged(s) || own.Poll().Unchanged(s) {
		t.Error("the owned Watcher missed a chmod of its watched file")
	}
}

// TestWatcherClosesWhenUnreachable: a Watcher an owner dropped (an engine
// a test made and let go) gives its descriptors back once nothing can ask
// it any more, so making one per owner does not run the process out of
// inotify instances.
func TestWatcherClosesWhenUnreachable(t *testing.T) {
	dir := t.TempDir()
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := fds()
	func() {
		for range 8 {
			if _, ok := New().Watch([]string{dir}); !ok {
				testdep.Missing(t, "a watchable file system", "cannot watch "+dir+" here (not a local file system, or inotify limits)")
			}
		}
	}()
	if opened := fds() - before; opened < 16 {
		t.Fatalf("8 Watchers opened %d descriptors, want 2 each", opened)
	}
	deadline := time.Now().Add(10 * time.Second)
	for fds() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors of unreachable Watchers still open after 10s", fds()-before)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}
