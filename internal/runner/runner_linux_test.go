package runner

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/reaper"
)

// procStat is the part of /proc/PID/stat the tests need.
type procStat struct {
	pid, ppid, pgid int
	state           byte
}

// readStat parses /proc/PID/stat; ok is false when the process is gone.
func readStat(pid int) (st procStat, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, false
	}
	// The command name is parenthesised and may hold spaces or ')'.
	rest := b[bytes.LastIndexByte(b, ')')+2:]
	f := strings.Fields(string(rest))
	if len(f) < 3 {
		return st, false
	}
	st.pid = pid
	st.state = f[0][0]
	st.ppid, _ = strconv.Atoi(f[1])
	st.pgid, _ = strconv.Atoi(f[2])
	return st, true
}

// alive reports whether pid exists and is not a zombie (a zombie is dead;
// whether this container's init reaps it is not the runner's business).
func alive(pid int) bool {
	st, ok := readStat(pid)
	return ok && st.state != 'Z' && st.state != 'X'
}

// groupMembers lists the live processes whose process group is pgid.
func groupMembers(pgid int) []procStat {
	ents, _ := os.ReadDir("/proc")
	var out []procStat
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok && st.pgid == pgid && st.state != 'Z' && st.state != 'X' {
			out = append(out, st)
		}
	}
	return out
}

// requireGone fails unless every pid (and every member of process group
// pgid, when non-zero) is dead. SIGKILL is delivered asynchronously, so it
// polls, for at most 30 s: a bound against hanging, not a timing assertion.
func requireGone(t *testing.T, pgid int, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var left []string
		if pgid > 0 {
			for _, st := range groupMembers(pgid) {
				left = append(left, fmt.Sprintf("pid %d (state %c) in group %d", st.pid, st.state, pgid))
			}
		}
		for _, pid := range pids {
			if alive(pid) {
				left = append(left, fmt.Sprintf("pid %d", pid))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left behind: %s", strings.Join(left, ", "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readPids reads the whitespace-separated pids a command wrote to path.
func readPids(t *testing.T, path string) []int {
	t.Helper()
	var pids []int
	for _, f := range strings.Fields(waitFile(t, path)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid file %s: %v", path, err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// vmHWM returns this process's peak resident set size in kB.
func vmHWM() (int, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/self/status")
}

// TestRunTimeoutKillsProcessTree runs a shell with two background sleeps
// past its timeout and checks the whole tree is dead when Run returns:
// also for a command confined in-thread with network none, whose
// Landlock domain scopes signals (the kill comes from outside it).
func TestRunTimeoutKillsProcessTree(t *testing.T) {
	for _, tc := range []struct {
		name              string
		withPTY, confined bool
	}{{"pty=false", false, false}, {"pty=true", true, false}, {"confined in-thread", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pidfile := filepath.Join(dir, "pids")
			var c *confine.Confinement
			start := ConfineAsk
			if tc.confined {
				needLandlock(t, 6)
				c = &confine.Confinement{Writable: []string{dir}, Network: confine.NetworkNone}
				start = ConfineInThread
			}
			// The timeout fires once both sleeps run, however slowly the
			// shell starts them on a loaded machine: the tree is always
			// there to be killed.
			res, err := testRunner.Run(context.Background(), Spec{
				Command:      `sleep 100 & a=$!; sleep 100 & echo $a $! > ` + pidfile + `; wait`,
				Timeout:      500 * time.Millisecond,
				PTY:          tc.withPTY,
				Confine:      c,
				confineStart: start,
				withTimeout:  timeoutWhen(func() bool { return fileHasLine(pidfile) }),
			})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			want := outcome{ExitCode: -1, TimedOut: true, Error: "timed out after 500ms: process group killed"}
			if diff := diffOutcome(want, res); diff != "" {
				t.Errorf("Run (-want +got):\n%s", diff)
			}
			requireGone(t, res.Pid, append(readPids(t, pidfile), res.Pid)...)
		})
	}
}

// timeoutWhen returns a Spec.withTimeout whose timeout fires as soon as
// ready reports true (polled; a minute at most, against hanging), as a
// real deadline does: Done closes and Err is context.DeadlineExceeded.
func timeoutWhen(ready func() bool) func(context.Context, time.Duration) (context.Context, context.CancelFunc) {
	return func(parent context.Context, _ time.Duration) (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancelCause(parent)
		fire := &firedDeadline{Context: ctx}
		go func() {
			for deadline := time.Now().Add(time.Minute); !ready() && time.Now().Before(deadline) && ctx.Err() == nil; {
				time.Sleep(5 * time.Millisecond)
			}
			cancel(context.DeadlineExceeded)
		}()
		return fire, func() { cancel(context.Canceled) }
	}
}

// firedDeadline reports its cancellation cause as its error, so a timeout
// fired by timeoutWhen reads as context.DeadlineExceeded.
type firedDeadline struct{ context.Context }

func (f *firedDeadline) Err() error {
	if f.Context.Err() == nil {
		return nil
	}
	return context.Cause(f.Context)
}

// fileHasLine reports whether path holds a complete line.
func fileHasLine(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && bytes.HasSuffix(b, []byte("\n"))
}

// TestRunCancelKillsProcessTree cancels the context once the tree is
// known to be running, then checks output written before the kill is kept
// and every process is dead.
func TestRunCancelKillsProcessTree(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pids")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Cancel once the sleeps run (or after a minute, against hanging).
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if fileHasLine(pidfile) {
				break
			}
		}
		cancel()
	}()
	res, err := testRunner.Run(ctx, Spec{Command: `echo started; sleep 100 & a=$!; sleep 100 & echo $a $! > ` + pidfile + `; wait`})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := outcome{ExitCode: -1, Stdout: "started\n", Error: "canceled: process group killed"}
	if diff := diffOutcome(want, res); diff != "" {
		t.Errorf("Run (-want +got):\n%s", diff)
	}
	requireGone(t, res.Pid, append(readPids(t, pidfile), res.Pid)...)
}

// TestRunContextDeadlineIsTimeout checks a caller's deadline counts as a
// timeout like Spec.Timeout.
func TestRunContextDeadlineIsTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err := testRunner.Run(ctx, Spec{Argv: []string{"sleep", "100"}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := outcome{ExitCode: -1, TimedOut: true, Error: "timed out (deadline exceeded): process group killed"}
	if diff := diffOutcome(want, res); diff != "" {
		t.Errorf("Run (-want +got):\n%s", diff)
	}
	requireGone(t, res.Pid, res.Pid)
}

// TestRunBackgroundChildHoldingOutput runs a command that exits while a
// background child keeps its stdout open: Run must return (after
// OutputGrace), report the command's own status, and kill the child.
func TestRunBackgroundChildHoldingOutput(t *testing.T) {
	for _, withPTY := range []bool{false, true} {
		t.Run(fmt.Sprintf("pty=%v", withPTY), func(t *testing.T) {
			t.Parallel()
			pidfile := filepath.Join(t.TempDir(), "pid")
			res, err := testRunner.Run(context.Background(), Spec{
				// The trap keeps the sleep alive through the SIGHUP a
				// terminal's session leader sends its group on exit.
				Command: `trap '' HUP; sleep 100 & echo $! > ` + pidfile + `; echo done`,
				PTY:     withPTY,
			})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			nl := "\n"
			if withPTY {
				nl = "\r\n"
			}
			want := outcome{Success: true, Stdout: "done" + nl}
			if diff := diffOutcome(want, res); diff != "" {
				t.Errorf("Run (-want +got):\n%s", diff)
			}
			if !res.Stragglers {
				t.Errorf("Stragglers = false; the sleep held the output")
			}
			requireGone(t, res.Pid, readPids(t, pidfile)...)
		})
	}
}

// TestRunEscapedChildDoesNotHang has a grandchild leave the process group
// (setsid) with stdout still open. No group kill reaches it; Run must still
// return after OutputGrace instead of waiting for it.
func TestRunEscapedChildDoesNotHang(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	res, err := testRunner.Run(context.Background(), Spec{
		Argv: []string{"/bin/sh", "-c", `"$0" & echo $!`, exe},
		Env:  map[string]string{helperEnv: "escape"},
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
	if err != nil {
		t.Fatalf("stdout %q: %v", res.Stdout, err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if !res.Success || !res.Stragglers {
		t.Errorf("Run = %+v; want success with stragglers", outcomeOf(res))
	}
	if !alive(pid) {
		t.Errorf("control: the escaped helper %d is not running; the test proved nothing", pid)
	}
}

// TestRunnerDeathKillsCommand SIGKILLs a runner process (the test binary as
// helper) while its command runs, and checks every process of the command
// dies with it: the direct child through the parent-death signal, and
// background grandchildren through the reaper (the parent-death signal
// never reaches them).
func TestRunnerDeathKillsCommand(t *testing.T) {
	tests := []struct {
		name, role string
		pids       int // processes the helper's command reports
	}{
		{"direct child (parent-death signal)", "orphan", 1},
		{"grandchildren (reaper)", "orphan-tree", 3},
		{"direct child started in-thread confined (parent-death signal)", "orphan-confined", 1},
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "pid")
			helper := exec.Command(exe)
			helper.Env = append(os.Environ(), helperEnv+"="+tt.role, "EXECHOST_RUNNER_TEST_PIDFILE="+pidfile)
			if err := helper.Start(); err != nil {
				t.Fatal(err)
			}
			waited := false
			t.Cleanup(func() {
				if !waited {
					helper.Process.Kill()
					helper.Wait()
				}
			})
			pids := readPids(t, pidfile)
			if len(pids) != tt.pids {
				t.Fatalf("want %d pids, got %v", tt.pids, pids)
			}
			for _, pid := range pids {
				if !alive(pid) {
					t.Fatalf("control: process %d is not running", pid)
				}
				t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			}
			if tt.role == "orphan-tree" {
				waitFile(t, pidfile+".tracked") // the reaper knows the group
			}
			if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			helper.Wait()
			waited = true
			requireGone(t, 0, pids...)
		})
	}
}

// diffOutcome compares the outcome of res with want.
func diffOutcome(want outcome, res Result) string {
	return cmp.Diff(want, outcomeOf(res))
}

// TestPortableLauncher runs every other test of the package again with the
// portable launcher (os/exec and goroutines), which Linux replaces with
// the polled one but other platforms use: both must behave the same.
func TestPortableLauncher(t *testing.T) {
	if !testRunner.WarmSupported() {
		t.Skip("the portable launcher is the one every test here uses already")
	}
	if testing.Short() {
		t.Skip("runs the whole package again")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^Test", "-test.skip=^TestPortableLauncher$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), launcherEnv+"=portable")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the package's tests with the portable launcher: %v\n%s", err, out)
	}
}

// TestRunRefusedWhenReaperTableFull: a run the reaper could not track is
// not started (it would outlive a crashed daemon), and says why.
func TestRunRefusedWhenReaperTableFull(t *testing.T) {
	reaperState.mu.Lock()
	enabled, table, free := reaperState.enabled, reaperState.table, reaperState.free
	reaperState.enabled, reaperState.table, reaperState.free = true, make([]byte, 4*reaper.Slots), nil
	reaperState.mu.Unlock()
	t.Cleanup(func() {
		reaperState.mu.Lock()
		reaperState.enabled, reaperState.table, reaperState.free = enabled, table, free
		reaperState.mu.Unlock()
	})
	pidfile := filepath.Join(t.TempDir(), "pid")
	res, err := testRunner.Run(context.Background(), Spec{Command: `echo $$ > ` + pidfile + `; exec sleep 100`, Timeout: time.Minute})
	if !errors.Is(err, ErrTooManyRuns) {
		t.Fatalf("Run = %+v, %v; want ErrTooManyRuns", res, err)
	}
	if res.Error == "" || res.Success {
		t.Errorf("result %+v does not say why nothing ran", res)
	}
	if res.Pid > 0 {
		requireGone(t, res.Pid, res.Pid)
	}
}

// TestLeaderReapedAfterLastKill: every signal to a run's process group is
// sent while its leader is unreaped (a zombie at worst), so the group's id
// cannot have been reused by then; and the reaper no longer lists the group
// when the leader is reaped. A kill after the reap could hit an unrelated
// process group that took the id (a warm process, a user's shell job).
// Both cases kill after the leader has exited: a child that left the group
// still holds the output (the straggler kill), and a timeout whose tree is
// killed again after the exit.
func TestLeaderReapedAfterLastKill(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A table of its own (not parallel with other tests): the group must
	// be listed while it runs and gone from it before the reap.
	reaperState.mu.Lock()
	enabled, table, free := reaperState.enabled, reaperState.table, reaperState.free
	reaperState.enabled, reaperState.table, reaperState.free = true, make([]byte, 4*reaper.Slots), []int32{1, 2, 3, 4}
	reaperState.mu.Unlock()
	t.Cleanup(func() {
		reaperState.mu.Lock()
		reaperState.enabled, reaperState.table, reaperState.free = enabled, table, free
		reaperState.mu.Unlock()
	})
	tests := []struct {
		name string
		spec func(t *testing.T) Spec
		want func(t *testing.T, res Result)
	}{
		{"straggler outside the group", func(t *testing.T) Spec {
			return Spec{Argv: []string{"/bin/sh", "-c", `"$0" & echo $!`, exe}, Env: map[string]string{helperEnv: "escape"}}
		}, func(t *testing.T, res Result) {
			if pid, err := strconv.Atoi(strings.TrimSpace(res.Stdout)); err == nil {
				t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			}
			if !res.Stragglers {
				t.Errorf("Stragglers = false; the escaped helper held the output (result %+v)", outcomeOf(res))
			}
		}},
		{"timeout", func(t *testing.T) Spec {
			pidfile := filepath.Join(t.TempDir(), "pid")
			return Spec{
				Command:     `sleep 100 & echo $! > ` + pidfile + `; wait`,
				Timeout:     time.Minute,
				withTimeout: timeoutWhen(func() bool { return fileHasLine(pidfile) }),
			}
		}, func(t *testing.T, res Result) {
			if !res.TimedOut {
				t.Errorf("TimedOut = false (result %+v)", outcomeOf(res))
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := tc.spec(t)
			var seen []string
			calls := 0
			spec.OnStart = func() {
				if !reaperListsAny() {
					seen = append(seen, "the reaper lists no group while the run is started")
				}
			}
			spec.beforeReap = func(pid int) {
				calls++
				st, ok := readStat(pid)
				if !ok || st.state != 'Z' || st.ppid != os.Getpid() {
					seen = append(seen, fmt.Sprintf("leader %d is not this process's zombie (stat %+v, found %v)", pid, st, ok))
				}
				if reaperLists(pid) {
					seen = append(seen, fmt.Sprintf("the reaper still lists group %d", pid))
				}
			}
			res, err := testRunner.Run(context.Background(), spec)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if calls != 1 {
				t.Fatalf("beforeReap called %d times; want once", calls)
			}
			for _, s := range seen {
				t.Error(s)
			}
			tc.want(t, res)
		})
	}
}

// reaperListsAny reports whether the reaper's table holds any group.
func reaperListsAny() bool {
	reaperState.mu.Lock()
	table := reaperState.table
	reaperState.mu.Unlock()
	for i := 1; i < len(table)/4; i++ {
		if slot(table, i).Load() != 0 {
			return true
		}
	}
	return false
}

// reaperLists reports whether the reaper's table holds group pgid.
func reaperLists(pgid int) bool {
	reaperState.mu.Lock()
	table := reaperState.table
	reaperState.mu.Unlock()
	for i := 1; i < len(table)/4; i++ {
		if int(slot(table, i).Load()) == pgid {
			return true
		}
	}
	return false
}

// TestStartNotice: a start notice let wait (Spec.StartNotice) comes once,
// before Run returns, while a run that outlasts it still runs and with the
// end of one that does not.
func TestStartNotice(t *testing.T) {
	t.Parallel()
	t.Run("heard while a longer run runs", func(t *testing.T) {
		t.Parallel()
		flag := filepath.Join(t.TempDir(), "started")
		calls := 0
		// The command ends only once the notice came: a notice held to
		// the end would leave it to its timeout.
		res, err := runWithin(t, Spec{
			Command: `while [ ! -e ` + flag + ` ]; do sleep 0.01; done`, Timeout: 10 * time.Second,
			StartNotice: time.Millisecond,
			OnStart: func() {
				calls++
				if err := os.WriteFile(flag, nil, 0o600); err != nil {
					t.Error(err)
				}
			},
		})
		if err != nil || res.TimedOut || res.ExitCode != 0 {
			t.Fatalf("run: %v, %+v", err, outcomeOf(res))
		}
		if calls != 1 {
			t.Fatalf("OnStart called %d times; want once", calls)
		}
	})
	t.Run("heard with the end of a shorter run", func(t *testing.T) {
		t.Parallel()
		calls := 0
		// An hour's notice must not hold up the end of a run.
		res, err := runWithin(t, Spec{Argv: []string{"true"}, StartNotice: time.Hour, OnStart: func() { calls++ }})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("run: %v, %+v", err, outcomeOf(res))
		}
		if calls != 1 {
			t.Fatalf("OnStart called %d times; want once", calls)
		}
	})
}

// runWithin runs spec and fails t if Run has not returned within a
// minute.
func runWithin(t *testing.T, spec Spec) (Result, error) {
	t.Helper()
	type out struct {
		res Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := testRunner.Run(context.Background(), spec)
		done <- out{res, err}
	}()
	select {
	case o := <-done:
		return o.res, o.err
	case <-time.After(time.Minute):
		t.Fatal("Run did not return within a minute")
		return Result{}, nil
	}
}
