package shellcmd

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/exechost/exechost/internal/fschange"
)

// TestResolutionCacheSeesEveryChange resolves a bare name around each kind
// of change to the search path — adding, removing, replacing, chmod-ing
// and re-linking files, replacing and re-linking directories and their
// ancestors — with the absent-name cache trusted (the clock moved an hour
// ahead), and checks that the resolution after the change always sees it:
// with the analysis memo holding the text's analysis (also when the
// absent-name cache already knew the name was missing, so that the memo's
// facts hold the directory's stat alone), and with a new text each time,
// answered from the fact cache.
//
// The caches watch every directory on the way, so an entry anyone else
// makes in one of them (other tests' files in /tmp) reports a change too,
// and an attempt then proves nothing. The test therefore runs itself
// again in a user and mount namespace of its own, with a fresh tmpfs as
// /tmp, and every attempt works in a directory of its own case's, made
// before the parallel subtests start.
func TestResolutionCacheSeesEveryChange(t *testing.T) {
	if os.Getenv(privateTmpEnv) != "" {
		mountPrivateTmp(t)
	} else if inPrivateTmp(t) {
		return
	}
	later := func() time.Time { return time.Now().Add(time.Hour) }
	base := t.TempDir()
	dir := func(name string) string {
		d := filepath.Join(base, name)
		mkdir(t, d)
		return d
	}
	for i, mode := range []cacheMode{viaMemo, viaMemoAbsentFirst, viaFacts} {
		d := dir(strconv.Itoa(i))
		t.Run(string(mode)+", watched", func(t *testing.T) {
			t.Parallel()
			testResolutionCacheSeesEveryChange(t, d, Options{Now: later}, mode)
		})
	}
	d := dir("unwatched")
	t.Run("facts read on every reuse", func(t *testing.T) {
		t.Parallel()
		testResolutionCacheSeesEveryChange(t, d, Options{Now: later, Watch: func([]string) (fschange.Set, bool) { return fschange.Set{}, false }}, viaMemo)
	})
}

// privateTmpEnv is set in the process TestResolutionCacheSeesEveryChange
// runs itself again in, with a /tmp of its own.
const privateTmpEnv = "EXECHOST_TEST_PRIVATE_TMP"

// inPrivateTmp runs t's test again in a child process in a new user and
// mount namespace (mountPrivateTmp gives it a fresh /tmp), fails t if it
// fails there, and reports whether it ran. Where no namespace can be made
// it reports false and the test runs here, in the shared /tmp.
func inPrivateTmp(t *testing.T) bool {
	t.Helper()
	args := []string{"-test.run=^" + t.Name() + "$", "-test.count=1", "-test.timeout=10m", "-test.v"}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), privateTmpEnv+"=1", "TMPDIR=/tmp")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
	}
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || strings.Contains(string(out), noPrivateTmp) {
		t.Logf("no user and mount namespace for a private /tmp (%v): running in the shared one, where other tests' files may use up the attempts\n%s", err, out)
		return false
	}
	if err != nil || !strings.Contains(string(out), "\n--- PASS: "+t.Name()+" ") {
		t.Fatalf("in a private /tmp: %v\n%s", err, out)
	}
	if testing.Verbose() {
		t.Logf("in a private /tmp:\n%s", out)
	}
	return true
}

// noPrivateTmp is what the child prints when it made its namespaces but
// may not mount (a security module may allow the one and refuse the
// other): the parent then runs in the shared /tmp.
const noPrivateTmp = "no private /tmp here"

// mountPrivateTmp mounts a fresh tmpfs on /tmp, in the mount namespace
// inPrivateTmp made.
func mountPrivateTmp(t *testing.T) {
	t.Helper()
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		t.Skipf("%s: make the mounts private: %v", noPrivateTmp, err)
	}
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", 0, "mode=1777"); err != nil {
		t.Skipf("%s: mount a tmpfs on /tmp: %v", noPrivateTmp, err)
	}
}

// cacheMode says which cache a resolution test goes through.
type cacheMode string

const (
	viaMemo            cacheMode = "memo"
	viaMemoAbsentFirst cacheMode = "memo after the absent-name cache"
	viaFacts           cacheMode = "fact cache"
)

// testResolutionCacheSeesEveryChange runs every case in a directory of its
// own under dir, which nothing else changes.
func testResolutionCacheSeesEveryChange(t *testing.T, dir string, opts Options, mode cacheMode) {
	type layout = resolveLayout
	rename := func(t *testing.T, from, to string) {
		t.Helper()
		if err := os.Rename(from, to); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		// setup prepares a (and anything else) and returns the PATH entry
		// for a, if it is not l.a itself.
		setup  func(t *testing.T, l layout) string
		change func(t *testing.T, l layout)
		// before and after are the expected resolved paths (relative to
		// root; "" for a miss).
		before, after string
	}{
		{"add a file to an earlier directory", nil,
			func(t *testing.T, l layout) { writeExe(t, filepath.Join(l.a, "tool")) }, "b/tool", "a/tool"},
		{"rename a file into place", nil,
			func(t *testing.T, l layout) {
				writeExe(t, filepath.Join(l.root, "staged"))
				rename(t, filepath.Join(l.root, "staged"), filepath.Join(l.a, "tool"))
			}, "b/tool", "a/tool"},
		{"hard-link a file into place", nil,
			func(t *testing.T, l layout) {
				if err := os.Link(filepath.Join(l.b, "tool"), filepath.Join(l.a, "tool")); err != nil {
					t.Fatal(err)
				}
			}, "b/tool", "a/tool"},
		{"symlink a file into place", nil,
			func(t *testing.T, l layout) { symlink(t, filepath.Join(l.b, "tool"), filepath.Join(l.a, "tool")) }, "b/tool", "a/tool"},
		{"remove a file",
			func(t *testing.T, l layout) string { writeExe(t, filepath.Join(l.a, "tool")); return "" },
			func(t *testing.T, l layout) { os.Remove(filepath.Join(l.a, "tool")) }, "a/tool", "b/tool"},
		{"chmod a file -x",
			func(t *testing.T, l layout) string { writeExe(t, filepath.Join(l.a, "tool")); return "" },
			func(t *testing.T, l layout) { os.Chmod(filepath.Join(l.a, "tool"), 0o644) }, "a/tool", "b/tool"},
		{"replace a file with a non-executable one",
			func(t *testing.T, l layout) string { writeExe(t, filepath.Join(l.a, "tool")); return "" },
			func(t *testing.T, l layout) {
				os.WriteFile(filepath.Join(l.root, "plain"), []byte("x"), 0o644)
				rename(t, filepath.Join(l.root, "plain"), filepath.Join(l.a, "tool"))
			}, "a/tool", "b/tool"},
		{"re-link a symlinked file to a non-executable",
			func(t *testing.T, l layout) string {
				writeExe(t, filepath.Join(l.root, "exe"))
				os.WriteFile(filepath.Join(l.root, "plain"), []byte("x"), 0o644)
				symlink(t, filepath.Join(l.root, "exe"), filepath.Join(l.a, "tool"))
				return ""
			},
			func(t *testing.T, l layout) {
				symlink(t, filepath.Join(l.root, "plain"), filepath.Join(l.root, "newlink"))
				rename(t, filepath.Join(l.root, "newlink"), filepath.Join(l.a, "tool"))
			}, "a/tool", "b/tool"},
		{"replace the directory", nil,
			func(t *testing.T, l layout) {
				mkdir(t, filepath.Join(l.root, "a2"))
				writeExe(t, filepath.Join(l.root, "a2", "tool"))
				rename(t, l.a, filepath.Join(l.root, "a.old"))
				rename(t, filepath.Join(l.root, "a2"), l.a)
			}, "b/tool", "a/tool"},
		{"re-link a symlinked directory",
			func(t *testing.T, l layout) string {
				mkdir(t, filepath.Join(l.root, "d2"))
				writeExe(t, filepath.Join(l.root, "d2", "tool"))
				symlink(t, l.a, filepath.Join(l.root, "link"))
				return filepath.Join(l.root, "link")
			},
			func(t *testing.T, l layout) {
				symlink(t, filepath.Join(l.root, "d2"), filepath.Join(l.root, "link2"))
				rename(t, filepath.Join(l.root, "link2"), filepath.Join(l.root, "link"))
			}, "b/tool", "link/tool"},
		{"re-link an ancestor directory",
			func(t *testing.T, l layout) string {
				mkdir(t, filepath.Join(l.root, "v1", "bin"))
				mkdir(t, filepath.Join(l.root, "v2", "bin"))
				writeExe(t, filepath.Join(l.root, "v2", "bin", "tool"))
				symlink(t, filepath.Join(l.root, "v1"), filepath.Join(l.root, "cur"))
				return filepath.Join(l.root, "cur", "bin")
			},
			func(t *testing.T, l layout) {
				symlink(t, filepath.Join(l.root, "v2"), filepath.Join(l.root, "cur2"))
				rename(t, filepath.Join(l.root, "cur2"), filepath.Join(l.root, "cur"))
			}, "b/tool", "cur/bin/tool"},
		{"rename an ancestor and put another in its place",
			func(t *testing.T, l layout) string {
				mkdir(t, filepath.Join(l.root, "p", "bin"))
				mkdir(t, filepath.Join(l.root, "q", "bin"))
				writeExe(t, filepath.Join(l.root, "q", "bin", "tool"))
				return filepath.Join(l.root, "p", "bin")
			},
			func(t *testing.T, l layout) {
				rename(t, filepath.Join(l.root, "p"), filepath.Join(l.root, "p.old"))
				rename(t, filepath.Join(l.root, "q"), filepath.Join(l.root, "p"))
			}, "b/tool", "p/bin/tool"},
	}
	for i, tc := range cases {
		caseDir := filepath.Join(dir, strconv.Itoa(i))
		mkdir(t, caseDir)
		t.Run(tc.name, func(t *testing.T) {
			// An attempt proves something only if the caches' watches
			// were quiet right before the change: anything else created
			// in a directory on the way reports a change too, and the
			// caches then read afresh, right either way. Only this case
			// changes caseDir, and only between attempts; what is left
			// is / (and /tmp, where no private one could be made).
			for range 50 {
				if resolutionCaseQuiet(t, caseDir, opts, mode, tc.setup, tc.change, tc.before, tc.after) {
					return
				}
			}
			t.Fatal("no attempt had quiet watches before the change, so this test proves nothing")
		})
	}
}

// resolutionCaseQuiet runs one attempt of a case of
// testResolutionCacheSeesEveryChange and says whether the caches' watches
// were quiet right before the change.
func resolutionCaseQuiet(t *testing.T, caseDir string, opts Options, mode cacheMode,
	setup func(t *testing.T, l resolveLayout) string, change func(t *testing.T, l resolveLayout), before, after string) bool {
	t.Helper()
	if mode != viaFacts {
		// The fact cache's watches share inotify watches with the memo's
		// (one per inode, its events counted for every Set holding it),
		// and would report changes the memo's own Set misses.
		opts.NoFactCache = true
	}
	z := New(opts)
	root, err := os.MkdirTemp(caseDir, "")
	if err == nil {
		root, err = filepath.EvalSymlinks(root)
	}
	if err != nil {
		t.Fatal(err)
	}
	l := resolveLayout{root: root, a: filepath.Join(root, "a"), b: filepath.Join(root, "b")}
	mkdir(t, l.a)
	mkdir(t, l.b)
	writeExe(t, filepath.Join(l.b, "tool"))
	entry := l.a
	if setup != nil {
		if e := setup(t, l); e != "" {
			entry = e
		}
	}
	env := Env{Cwd: root, PATH: entry + ":" + l.b, Home: root}
	n := 0
	resolve := func() string {
		text := "tool"
		if mode == viaFacts {
			n++
			text = fmt.Sprintf("tool %d", n) // first seen: the memo misses
		}
		a := z.Analyze(text, env)
		if !a.OK || len(a.Segments) != 1 {
			t.Fatalf("Analyze(tool) = %+v", a)
		}
		return a.Segments[0].ResolvedPath
	}
	rel := func(p string) string {
		if p == "" {
			return ""
		}
		r, _ := filepath.Rel(root, p)
		return r
	}
	// Let the file system's clock pass the tick of the setup, as it would
	// have on a real host between two changes; the cache would otherwise
	// (rightly) refuse to trust these directories.
	waitFSTick(t, root, entry)
	switch mode {
	case viaMemoAbsentFirst:
		z.Analyze("tool x", env) // the memo's entry then holds a's stat alone
	case viaFacts:
		resolve() // read once; the second read watches
	}
	if got := rel(resolve()); got != before {
		t.Fatalf("before: resolved %q, want %q", got, before)
	}
	dfi, err := os.Stat(entry)
	if err != nil {
		t.Fatal(err)
	}
	if before == "b/tool" && !z.absent.has(entry, dfi, "tool") {
		t.Fatal("the absent-name cache was not used, so this test proves nothing")
	}
	hits, factHits := z.memoHits(), z.factHits()
	if got := rel(resolve()); got != before { // from the caches
		t.Fatalf("again: resolved %q, want %q", got, before)
	}
	if mode == viaFacts {
		if z.factHits() == factHits || !z.factsQuiet() {
			return false
		}
		change(t, l)
	} else {
		if z.memoHits() != hits+1 {
			t.Fatal("the analysis memo was not used, so this test proves nothing for it")
		}
		set := z.memoWatch(t, "tool", env)
		if set.Valid() && !fschange.Unchanged(set) {
			return false
		}
		change(t, l)
		if set.Valid() && fschange.Unchanged(set) {
			t.Error("the memo's watch Set did not report the change")
		}
	}
	if got := rel(resolve()); got != after {
		t.Errorf("after the change: resolved %q, want %q", got, after)
	}
	return true
}

// resolveLayout is the tree of a testResolutionCacheSeesEveryChange case:
// PATH a:b with b/tool; a is where changes happen.
type resolveLayout struct{ root, a, b string }

// factsQuiet reports whether every watched fact's Set is unchanged now.
func (z *Analyzer) factsQuiet() bool {
	z.facts.mu.Lock()
	defer z.facts.mu.Unlock()
	v := z.polled.w.Poll() // the Analyzer's own Watcher took the Sets
	for _, e := range z.facts.m {
		if e.watched.Valid() && !v.Unchanged(e.watched) {
			return false
		}
	}
	return true
}

// TestResolutionCacheDistrustsFreshDirectories uses the real clock: a
// directory changed within racyWindow is never cached, so a file added
// within the same timestamp tick is still seen.
func TestResolutionCacheDistrustsFreshDirectories(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	mkdir(t, a)
	mkdir(t, b)
	writeExe(t, filepath.Join(b, "tool"))
	env := Env{Cwd: root, PATH: a + ":" + b, Home: root}
	z := New(Options{})
	if got := z.Analyze("tool", env).Paths(); len(got) != 1 || got[0] != filepath.Join(b, "tool") {
		t.Fatalf("before: %v", got)
	}
	dfi, _ := os.Stat(a)
	if z.absent.has(a, dfi, "tool") {
		t.Fatal("a directory changed just now was cached")
	}
	writeExe(t, filepath.Join(a, "tool"))
	if got := z.Analyze("tool", env).Paths(); len(got) != 1 || got[0] != filepath.Join(a, "tool") {
		t.Errorf("after adding a/tool: %v", got)
	}
}

// waitFSTick waits until a file created now gets a ctime later than that
// of every directory on the way to each of paths, i.e. until the file
// system's coarse clock has moved past the setup. It is bounded.
func waitFSTick(t *testing.T, probeDir string, paths ...string) {
	t.Helper()
	var newest int64
	for _, p := range paths {
		for d := p; d != "/" && d != "."; d = filepath.Dir(d) {
			var st syscall.Stat_t
			if syscall.Stat(d, &st) == nil {
				newest = max(newest, st.Ctim.Sec*1e9+st.Ctim.Nsec)
			}
		}
	}
	probe := filepath.Join(probeDir, ".tick")
	deadline := time.Now().Add(10 * time.Second)
	for {
		os.WriteFile(probe, nil, 0o600)
		var st syscall.Stat_t
		if err := syscall.Stat(probe, &st); err != nil {
			t.Fatal(err)
		}
		os.Remove(probe)
		if st.Ctim.Sec*1e9+st.Ctim.Nsec > newest {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the file system's clock did not advance")
		}
		time.Sleep(time.Millisecond)
	}
}

// memoWatch returns the watch Set of the memo's entry for text in env: it
// must have one where the test's directories can be watched (a local file
// system), so that the watched path is the one under test.
func (z *Analyzer) memoWatch(t *testing.T, text string, env Env) fschange.Set {
	t.Helper()
	z.memo.mu.Lock()
	e := z.memo.m[keyOf(text, env)]
	z.memo.mu.Unlock()
	if e == nil {
		t.Fatal("no memo entry")
	}
	if !e.watched.Valid() {
		if _, ok := z.watch([]string{env.Cwd}); ok {
			t.Fatal("the memo entry is not watched though its paths can be")
		}
		t.Logf("%s cannot be watched here: the memo reads its facts instead", env.Cwd)
	}
	return e.watched
}

func (z *Analyzer) factHits() int {
	if z.facts == nil {
		return 0
	}
	z.facts.mu.Lock()
	defer z.facts.mu.Unlock()
	return z.facts.hits
}

func (z *Analyzer) memoHits() int {
	z.memo.mu.Lock()
	defer z.memo.mu.Unlock()
	return z.memo.hits
}

// TestMemoReturnsCopies: a caller that changes the analysis it got must
// not change what the memo hands the next caller.
func TestMemoReturnsCopies(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	writeExe(t, filepath.Join(root, "tool"))
	env := Env{Cwd: root, PATH: root, Home: root}
	z := New(Options{})
	first := z.Analyze("tool a b", env)
	if !first.OK || len(first.Segments) != 1 {
		t.Fatalf("Analyze = %+v", first)
	}
	want := first.Segments[0].ResolvedPath
	hits := z.memoHits()
	got := z.Analyze("tool a b", env)
	if z.memoHits() != hits+1 {
		t.Fatal("the second analysis did not come from the memo")
	}
	got.Segments[0].ResolvedPath = "/changed"
	got.Segments[0].Argv[0] = "changed"
	again := z.Analyze("tool a b", env)
	if again.Segments[0].ResolvedPath != want || again.Segments[0].Argv[0] == "changed" {
		t.Errorf("the memo's analysis changed with a caller's copy: %+v", again.Segments[0])
	}
}

// TestMemoKeysEveryInput: the same text in another working directory,
// PATH or home directory is analysed afresh.
func TestMemoKeysEveryInput(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	mkdir(t, a)
	mkdir(t, b)
	writeExe(t, filepath.Join(a, "tool"))
	writeExe(t, filepath.Join(b, "tool"))
	z := New(Options{})
	for _, tc := range []struct {
		text string
		env  Env
		want string
	}{
		{"tool", Env{Cwd: root, PATH: a, Home: root}, filepath.Join(a, "tool")},
		{"tool", Env{Cwd: root, PATH: b, Home: root}, filepath.Join(b, "tool")},
		{"./tool", Env{Cwd: a, PATH: a, Home: root}, filepath.Join(a, "tool")},
		{"./tool", Env{Cwd: b, PATH: a, Home: root}, filepath.Join(b, "tool")},
		{"~/tool", Env{Cwd: root, PATH: a, Home: a}, filepath.Join(a, "tool")},
		{"~/tool", Env{Cwd: root, PATH: a, Home: b}, filepath.Join(b, "tool")},
	} {
		for range 2 { // the second from the memo
			if got := z.Analyze(tc.text, tc.env).Paths(); len(got) != 1 || got[0] != tc.want {
				t.Errorf("Analyze(%q, %+v) = %v, want %s", tc.text, tc.env, got, tc.want)
			}
		}
	}
}

// TestMemoMatchesFreshAnalysis changes a small tree at random — files
// added, removed, chmod-ed, replaced and re-linked, directories renamed,
// replaced and re-linked — and after every change compares each text's
// analysis through the memo with one made afresh: they must be equal.
func TestMemoMatchesFreshAnalysis(t *testing.T) {
	t.Parallel()
	testMatchesFreshAnalysis(t, false)
}

// TestFactCacheMatchesFreshAnalysis is TestMemoMatchesFreshAnalysis with a
// word no earlier text had added to every text, so that the memo misses
// and every path an earlier text read comes from the fact cache while its
// watch holds; an Analyzer without the fact cache must agree too.
func TestFactCacheMatchesFreshAnalysis(t *testing.T) {
	t.Parallel()
	testMatchesFreshAnalysis(t, true)
}

func testMatchesFreshAnalysis(t *testing.T, firstSeen bool) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	at := func(p string) string { return filepath.Join(root, p) }
	for _, d := range []string{"a", "b", "c", "d", "sub"} {
		mkdir(t, at(d))
	}
	symlink(t, at("c"), at("l"))
	writeExe(t, at("b/tool"))
	writeExe(t, at("sub/tool"))
	env := Env{Cwd: root, PATH: at("a") + ":" + at("l") + ":" + at("b"), Home: root}
	texts := []string{"tool", "tool2 x | tool y", "cd sub && ./tool", "l/tool", "./a/tool2", "cd l && tool"}
	names := []string{"a/tool", "a/tool2", "b/tool", "b/tool2", "c/tool", "d/tool", "sub/tool", "c/tool2"}
	seq := 0
	tmp := func() string { seq++; return at(fmt.Sprintf("tmp%d", seq)) }
	// put makes p a new executable file, whatever it was (a symlink, maybe
	// into a loop, included); a change that cannot be made is skipped.
	put := func(p string) {
		os.Remove(p)
		os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), 0o755)
	}
	changes := []func(r *rand.Rand){
		func(r *rand.Rand) { put(at(names[r.IntN(len(names))])) },
		func(r *rand.Rand) { os.Remove(at(names[r.IntN(len(names))])) },
		func(r *rand.Rand) { os.Chmod(at(names[r.IntN(len(names))]), 0o644) },
		func(r *rand.Rand) { os.Chmod(at(names[r.IntN(len(names))]), 0o755) },
		func(r *rand.Rand) { // replace a file by rename
			p := tmp()
			if r.IntN(2) == 0 {
				put(p)
			} else {
				os.WriteFile(p, []byte("x"), 0o644)
			}
			os.Rename(p, at(names[r.IntN(len(names))]))
		},
		func(r *rand.Rand) { // re-link a name to another file
			p := tmp()
			symlink(t, at(names[r.IntN(len(names))]), p)
			os.Rename(p, at(names[r.IntN(len(names))]))
		},
		func(r *rand.Rand) { // re-link the symlinked PATH directory
			p := tmp()
			symlink(t, at([]string{"c", "d", "sub"}[r.IntN(3)]), p)
			os.Rename(p, at("l"))
		},
		func(r *rand.Rand) { // replace a directory
			d := []string{"a", "b", "c", "sub"}[r.IntN(4)]
			p := tmp()
			mkdir(t, p)
			if r.IntN(2) == 0 {
				put(filepath.Join(p, "tool"))
			}
			os.Rename(at(d), tmp())
			os.Rename(p, at(d))
		},
	}
	r := rand.New(rand.NewPCG(1, 2))
	z, noFacts := New(Options{}), New(Options{NoFactCache: true})
	hits := z.memoHits()
	for step := range 300 {
		changes[r.IntN(len(changes))](r)
		for i, text := range texts {
			if firstSeen {
				text = fmt.Sprintf("%s w%d.%d", text, step, i)
			}
			got, want := z.Analyze(text, env), uncached.analyze(text, env, nil)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d, %q: through the caches\n %+v\nafresh\n %+v", step, text, got, want)
			}
			if firstSeen {
				if other := noFacts.Analyze(text, env); !reflect.DeepEqual(other, want) {
					t.Fatalf("step %d, %q: without the fact cache\n %+v\nafresh\n %+v", step, text, other, want)
				}
				continue
			}
			if again := z.Analyze(text, env); !reflect.DeepEqual(again, want) { // from the memo if it held
				t.Fatalf("step %d, %q: again through the memo\n %+v\nafresh\n %+v", step, text, again, want)
			}
		}
	}
	if firstSeen && z.factHits() == 0 {
		t.Fatal("the fact cache was never used, so this test proves nothing")
	}
	if !firstSeen && z.memoHits() == hits {
		t.Fatal("the memo was never used, so this test proves nothing")
	}
}
