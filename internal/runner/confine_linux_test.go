package runner

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/testdep"
	"github.com/exechost/exechost/internal/testproc"
)

// needLandlock skips (loudly) on a kernel without the ABI a test needs.
func needLandlock(t testing.TB, abi int) {
	t.Helper()
	if got := confine.KernelABI(); got < abi {
		testdep.Missing(t, "landlock", fmt.Sprintf("this test needs Landlock ABI %d (the kernel offers %d)", abi, got))
	}
}

// confineLayout is a tree with a writable work directory, a protected
// state directory holding a secret, and an outside directory.
type confineLayout struct{ work, state, outside, secret string }

func newConfineLayout(t *testing.T) confineLayout {
	t.Helper()
	root := t.TempDir()
	l := confineLayout{work: filepath.Join(root, "work"), state: filepath.Join(root, "state"), outside: filepath.Join(root, "outside")}
	for _, d := range []string{l.work, l.state, l.outside} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	l.secret = filepath.Join(l.state, "secret")
	if err := os.WriteFile(l.secret, []byte("the-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return l
}

// confinement is the layout's allowlist confinement: writes only in work,
// nothing in state, no TCP.
func (l confineLayout) confinement() *confine.Confinement {
	c, _ := confine.Confinement{Writable: []string{l.work}, Protected: []string{l.state}, Network: confine.NetworkNone}.Resolve()
	return &c
}

// TestConfineInThread runs real commands started in-thread (the runner
// restricts a thread of its own and forks the command from it) and checks
// the kernel refuses each way out, beside the same command unconfined,
// which gets through (so the test can tell).
func TestConfineInThread(t *testing.T) {
	needLandlock(t, 4)
	l := newConfineLayout(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	catID, err := IDOf("/bin/cat")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		spec       Spec
		confinedOK bool   // whether the confined run is to succeed
		left       string // a file the run must not have left when confined
	}{
		{name: "read the protected state", spec: Spec{Command: "cat " + l.secret}},
		{name: "read the protected state, pinned executable", spec: Spec{Argv: []string{"/bin/cat", l.secret}, Executable: &catID}},
		{name: "write outside the writable roots", spec: Spec{Command: "echo x > " + filepath.Join(l.outside, "f")}, left: filepath.Join(l.outside, "f")},
		{name: "write inside the writable roots", spec: Spec{Command: "echo x > " + filepath.Join(l.work, "f") + " && cat " + filepath.Join(l.work, "f")}, confinedOK: true},
		{name: "connect over TCP", spec: Spec{Argv: []string{os.Args[0]}, Env: map[string]string{helperEnv: "dial", "EXECHOST_RUNNER_TEST_ADDR": ln.Addr().String()}}},
	}
	kept := new(confine.Builder)
	defer kept.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec
			spec.Cwd, spec.Timeout = l.work, time.Minute
			free, err := testRunner.Run(context.Background(), spec)
			if err != nil || !free.Success {
				t.Fatalf("control: unconfined run = %+v, %v; want success", free, err)
			}
			if tt.left != "" {
				if err := os.Remove(tt.left); err != nil {
					t.Fatalf("control: the unconfined run left no %s: %v", tt.left, err)
				}
			}
			spec.Confine, spec.confineStart = l.confinement(), ConfineInThread
			// Rules built afresh, then by a Builder kept across the
			// runs (reused from the second run of the test on).
			for _, rules := range []*confine.Builder{nil, kept} {
				spec.ConfineRules = rules
				res, err := testRunner.Run(context.Background(), spec)
				if err != nil {
					t.Fatalf("confined run (kept rules %v): %v", rules != nil, err)
				}
				if res.Success != tt.confinedOK || strings.Contains(res.Stdout, "the-secret") || strings.Contains(res.Stdout, "connected") {
					t.Errorf("confined run (kept rules %v) = %+v; want success %v and nothing from outside the confinement", rules != nil, res, tt.confinedOK)
				}
				if tt.left != "" {
					if _, err := os.Stat(tt.left); err == nil {
						t.Errorf("the confined run (kept rules %v) wrote %s", rules != nil, tt.left)
					}
				}
			}
		})
	}
}

// TestConfineInThreadLeavesOtherThreadsFree starts confined commands
// in-thread, several at once, and checks that the restriction stayed on
// the threads that forked them: the test process can still write outside
// the commands' writable roots from any thread, and once the runs ended
// no thread of it is left with no_new_privs (each forking thread ended
// with its run).
func TestConfineInThreadLeavesOtherThreadsFree(t *testing.T) {
	needLandlock(t, 4)
	l := newConfineLayout(t)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := testRunner.Run(context.Background(), Spec{Command: "echo ok", Cwd: l.work, Timeout: time.Minute, Confine: l.confinement(), confineStart: ConfineInThread})
			if err != nil || res.Stdout != "ok\n" {
				t.Errorf("confined run %d = %+v, %v", i, res, err)
			}
		}()
	}
	wg.Wait()
	// Goroutines pinned to threads of their own, each a thread the
	// runtime has free: none may be restricted.
	errs := make(chan error, 16)
	for i := range cap(errs) {
		go func() {
			unlock := lockThread()
			defer unlock()
			errs <- os.WriteFile(filepath.Join(l.outside, strconv.Itoa(i)), []byte("x"), 0o600)
		}()
	}
	for range cap(errs) {
		if err := testproc.Recv(t, errs, "a host thread's write"); err != nil {
			t.Errorf("a thread of the host is restricted after confined runs: %v", err)
		}
	}
	// A thread's exit follows its goroutine's shortly after: wait for it,
	// with a deadline.
	var left []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if left = threadsWithNoNewPrivs(t); len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("threads still restricted (no_new_privs) after the runs ended: %v", left)
		}
	}
}

// TestConfineInThreadRefusesLimits: a caller that says in-thread for a
// confinement with resource limits (which InThread sends to the launcher)
// gets an error and nothing starts, and this process's own limit is left
// as it was; asked (ConfineAsk), the same run starts through the launcher
// and its command has the limit.
func TestConfineInThreadRefusesLimits(t *testing.T) {
	needLandlock(t, 4)
	l := newConfineLayout(t)
	var before unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &before); err != nil {
		t.Fatal(err)
	}
	c := l.confinement()
	c.Limits.FileSize = 4096
	marker := filepath.Join(l.work, "started")
	spec := Spec{Command: "ulimit -f > " + marker, Cwd: l.work, Timeout: time.Minute, Confine: c, confineStart: ConfineInThread}
	res, err := testRunner.Run(context.Background(), spec)
	if err == nil || !strings.Contains(err.Error(), "resource limits are per process") {
		t.Errorf("in-thread with limits = %+v, %v; want the start refused", res, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran")
	}
	var after unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("this process's RLIMIT_FSIZE changed: %+v, was %+v", after, before)
	}
	spec.confineStart = ConfineAsk
	if res, err := testRunner.Run(context.Background(), spec); err != nil || !res.Success {
		t.Fatalf("asked: %+v, %v", res, err)
	}
	if b, _ := os.ReadFile(marker); strings.TrimSpace(string(b)) != "8" { // 512-byte blocks
		t.Errorf("the command's file size limit = %q blocks, want 8", b)
	}
}

// threadsWithNoNewPrivs lists the threads of this process that have
// no_new_privs set.
func threadsWithNoNewPrivs(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		f, err := os.Open(filepath.Join("/proc/self/task", e.Name(), "status"))
		if err != nil {
			continue // exited meanwhile
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "NoNewPrivs:"); ok && strings.TrimSpace(v) != "0" {
				out = append(out, e.Name())
			}
		}
		f.Close()
	}
	return out
}

// ptraceParent is the helper role "ptrace-parent": it tries to attach
// (PTRACE_SEIZE) every thread of its parent, the runner, and prints how
// many it could. It exits without detaching: the kernel detaches a dead
// tracer's tracees.
func ptraceParent() int {
	ppid := os.Getppid()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", ppid))
	if err != nil {
		fmt.Println("list threads:", err)
		return 1
	}
	n := 0
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		if unix.PtraceSeize(tid) == nil {
			n++
		}
	}
	fmt.Printf("attached %d of %d\n", n, len(ents))
	return 0
}

// BenchmarkStartConfined measures a run of /bin/true unconfined, confined
// in-thread (forced where InThread would say the launcher) and confined
// through the launcher, with the rules built around a protected directory.
func BenchmarkStartConfined(b *testing.B) {
	needLandlock(b, 4)
	root := b.TempDir()
	work, state := filepath.Join(root, "work"), filepath.Join(root, "state")
	for _, d := range []string{work, state} {
		if err := os.Mkdir(d, 0o700); err != nil {
			b.Fatal(err)
		}
	}
	c := &confine.Confinement{Writable: []string{work}, Protected: []string{state}, Network: confine.NetworkNone}
	for _, bc := range []struct {
		name string
		spec Spec
	}{
		{"unconfined", Spec{}},
		{"in-thread", Spec{Confine: c, confineStart: ConfineInThread}},
		{"launcher", Spec{Confine: c}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			spec := bc.spec
			spec.Argv, spec.Cwd = []string{"/bin/true"}, work
			for b.Loop() {
				if res, err := testRunner.Run(context.Background(), spec); err != nil || !res.Success {
					b.Fatalf("%+v, %v", res, err)
				}
			}
		})
	}
}

// shieldedReach is the helper role "shielded-reach": it runs the
// ptrace-parent role confined, forced in-thread and as InThread decides,
// while this process is dumpable and once it is not, and prints what
// InThread said and what each command reached.
func shieldedReach() int {
	dir := os.Getenv("EXECHOST_RUNNER_TEST_DIR")
	c := &confine.Confinement{Writable: []string{dir}, Protected: []string{filepath.Join(dir, "state")}, Network: confine.NetworkAll}
	run := func(force bool) string {
		start := ConfineAsk
		if force {
			start = ConfineInThread
		}
		res, err := testRunner.Run(context.Background(), Spec{Argv: []string{os.Args[0]}, Env: map[string]string{helperEnv: "ptrace-parent"}, Cwd: dir, Timeout: time.Minute, Confine: c, confineStart: start})
		if err != nil || !res.Success {
			return fmt.Sprintf("run failed: %+v, %v", res, err)
		}
		return strings.TrimSpace(res.Stdout)
	}
	for _, dumpable := range []int{1, 0} {
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, uintptr(dumpable), 0, 0, 0); err != nil {
			fmt.Println("prctl:", err)
			return 1
		}
		ok, _ := c.InThread()
		fmt.Printf("dumpable=%d InThread=%v\n", dumpable, ok)
		fmt.Printf("dumpable=%d forced: %s\n", dumpable, run(true))
		fmt.Printf("dumpable=%d decided: %s\n", dumpable, run(false))
	}
	return 0
}

// TestConfineInThreadShielded: a command started in-thread shares the
// forking thread's Landlock domain; InThread lets a run start so only
// where the kernel's other checks keep the command from every thread of
// the host (not dumpable, no CAP_SYS_PTRACE). Each case runs a helper
// process that tries it both ways: a command started as InThread decides
// never reaches the host, and forced in-thread it reaches it exactly
// where InThread refuses (the control that the test can see a reach).
func TestConfineInThreadShielded(t *testing.T) {
	needLandlock(t, 4)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		pre  []string // what starts the helper
		caps bool     // whether it holds CAP_SYS_PTRACE
	}{{"without CAP_SYS_PTRACE", nil, false}}
	if os.Geteuid() == 0 {
		// setpriv drops it from root's bounding set, so the helper starts without it.
		cases[0].pre = []string{testdep.Binary(t, "setpriv"), "--bounding-set=-sys_ptrace", "--inh-caps=-sys_ptrace", "--"}
		cases = append(cases, struct {
			name string
			pre  []string
			caps bool
		}{"root with CAP_SYS_PTRACE", nil, true})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			res, err := testRunner.Run(context.Background(), Spec{Argv: append(tc.pre, exe, "-test.run=^$"), Env: map[string]string{helperEnv: "shielded-reach", "EXECHOST_RUNNER_TEST_DIR": dir}, Timeout: 2 * time.Minute})
			if err != nil || !res.Success {
				t.Fatalf("helper: %+v, %v", res, err)
			}
			t.Log(res.Stdout)
			shielded := !tc.caps
			want := []string{
				"dumpable=1 InThread=false", "dumpable=1 decided: attached 0 of",
				fmt.Sprintf("dumpable=0 InThread=%v", shielded), "dumpable=0 decided: attached 0 of",
			}
			for _, w := range want {
				if !strings.Contains(res.Stdout, w) {
					t.Errorf("want %q in the helper's output", w)
				}
			}
			for _, dumpable := range []int{1, 0} {
				reached := !strings.Contains(res.Stdout, fmt.Sprintf("dumpable=%d forced: attached 0 of", dumpable))
				if reached != (dumpable == 1 || !shielded) {
					t.Errorf("dumpable=%d, forced in-thread: reached the host %v, want %v", dumpable, reached, !reached)
				}
			}
		})
	}
}
