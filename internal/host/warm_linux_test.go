package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/sys/unix"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/testproc"
)

// warmFixture is a fixture whose engine keeps n warm interpreters, with
// its pool filled.
func warmFixture(t *testing.T, n int, allow ...string) (*fixture, *warmPool) {
	t.Helper()
	if !runner.WarmSupported() {
		t.Skip("warm interpreters need the polled launcher (pidfds); runs start afresh here")
	}
	f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, allow...)
	f.engine.WarmInterpreters = n
	// Warm interpreters serve runs confined by Landlock alone: with jails,
	// an interpreted run starts in its jail (jailInterpreter), afresh.
	f.engine.NoJail = true
	pool := f.engine.warm()
	waitWarm(t, pool, n)
	return f, pool
}

func waitWarm(t *testing.T, pool *warmPool, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pool.waitReady(ctx, n); err != nil {
		t.Fatalf("warm interpreters not ready: %v", err)
	}
}

// readyPids lists the pool's ready processes, oldest first.
func (p *warmPool) readyPids() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var pids []int
	for _, e := range p.ready {
		pids = append(pids, e.w.Pid())
	}
	return pids
}

func gone(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return errors.Is(err, os.ErrNotExist)
}

// TestWarmOneRunPerProcess: each interpreted run is handed the oldest
// ready process, a different one each time, which is gone once the run
// has finished; the pool refills to its size. A confined direct run is
// handed one too, as its launcher.
func TestWarmOneRunPerProcess(t *testing.T) {
	f, pool := warmFixture(t, 2, "$BIN/*")
	var used []int
	for i := range 3 {
		ready := pool.readyPids()
		res, err := f.engine.Run(context.Background(), Request{RawCommand: "hello a | other b", Cwd: f.dir})
		if err != nil || res.Stdout != "other b\n" {
			t.Fatalf("run %d: %+v, %v", i, res.Result, err)
		}
		// The oldest ready process: nothing here kills one, so none is
		// skipped as dead (TestWarmDeadOneIsSkipped covers that).
		if len(ready) == 0 || res.Pid != ready[0] {
			t.Fatalf("run %d ran in %d, not the oldest of the ready warm interpreters %v", i, res.Pid, ready)
		}
		if !gone(res.Pid) {
			t.Errorf("run %d: process %d still exists after its run", i, res.Pid)
		}
		if slices.Contains(used, res.Pid) {
			t.Errorf("run %d reused process %d", i, res.Pid)
		}
		used = append(used, res.Pid)
		waitWarm(t, pool, 2) // the pool refills
	}
	pool.mu.Lock()
	handed, started := pool.handed, pool.started
	pool.mu.Unlock()
	if handed != 3 || started != 5 {
		t.Errorf("handed %d, started %d; want 3 and 5", handed, started)
	}
	// A plain command starts directly, confined by Landlock alone (an
	// engine without jails; with one it starts in its standing jail): a
	// warm process is its launcher and execs it in place, so the command
	// is that process, and it is gone once the run has finished.
	f.engine.NoJail = true
	ready := pool.readyPids()
	res, err := f.engine.Run(context.Background(), Request{RawCommand: "hello", Cwd: f.dir})
	if err != nil || res.Stdout != "hello\n" || !slices.Contains(ready, res.Pid) {
		t.Errorf("a direct confined run did not start in a warm launcher %v: %+v, %v", ready, res.Result, err)
	}
	if !gone(res.Pid) {
		t.Errorf("the direct run's process %d still exists after its run", res.Pid)
	}
}

// TestWarmRunsGetTheirOwnEnvCwdAndTmp: what depends on the run is applied
// at hand-over: two runs, each in its own directory with its own
// environment, see their own cwd, variables and private TMPDIR, and
// nothing of the other's.
func TestWarmRunsGetTheirOwnEnvCwdAndTmp(t *testing.T) {
	f, _ := warmFixture(t, 2, "$BIN/*", "/usr/bin/printenv", "/bin/printenv")
	var tmps []string
	for i, v := range []string{"one", "two"} {
		dir := filepath.Join(f.dir, v)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		res, err := f.engine.Run(context.Background(), Request{RawCommand: "pwd && printenv LC_ALL TMPDIR", Cwd: dir, Env: map[string]string{"LC_ALL": "C." + v}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("run %d: %+v, %v", i, res.Result, err)
		}
		lines := strings.Split(strings.TrimSuffix(res.Stdout, "\n"), "\n")
		if len(lines) != 3 || lines[0] != dir || lines[1] != "C."+v || !strings.Contains(lines[2], "exechost-run-") {
			t.Fatalf("run %d saw %q; want its cwd %s, LC_ALL=C.%s and its own TMPDIR", i, lines, dir, v)
		}
		tmps = append(tmps, lines[2])
	}
	if tmps[0] == tmps[1] {
		t.Errorf("both runs had TMPDIR %s", tmps[0])
	}
}

// TestWarmTimeoutKillsTheGroup: a timeout kills the whole process group of
// a warm run, the interpreter and what it started.
func TestWarmTimeoutKillsTheGroup(t *testing.T) {
	f, pool := warmFixture(t, 1, "/usr/bin/sleep", "/bin/sleep")
	want := pool.readyPids()[0]
	res, err := f.engine.Run(context.Background(), Request{RawCommand: "sleep 30 | sleep 31", Cwd: f.dir, TimeoutMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pid != want || !res.TimedOut || res.Success {
		t.Fatalf("result %+v (warm pid %d), want a timed-out warm run", res.Result, want)
	}
	// Every process still in the group (killed ones not yet reaped by
	// their new parent) exits: wait on each one's pidfd, with a deadline
	// far below the sleeps' 30 seconds.
	for _, pid := range groupMembers(t, res.Pid) {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone already
		}
		exited, err := testproc.AwaitExit(fd, 10*time.Second)
		unix.Close(fd)
		if err != nil || !exited {
			t.Errorf("process %d of the timed-out group %d is still running: %v", pid, res.Pid, err)
		}
	}
}

// groupMembers lists the processes in process group pgid (from /proc).
func groupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	var out []int
	for _, s := range procStats(t) {
		if len(s.fields) > 2 && s.fields[2] == strconv.Itoa(pgid) {
			out = append(out, s.pid)
		}
	}
	return out
}

type procStat struct {
	pid    int
	fields []string // after "(comm)": state, ppid, pgrp, ...
}

func procStats(t *testing.T) []procStat {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []procStat
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces.
		out = append(out, procStat{pid: pid, fields: strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))})
	}
	return out
}

// TestWarmIdleReap: processes that waited the idle period (by the
// engine's clock) are ended and not replaced until a run takes one.
func TestWarmIdleReap(t *testing.T) {
	if !runner.WarmSupported() {
		t.Skip("warm interpreters need the polled launcher (pidfds)")
	}
	f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/*")
	f.engine.NoJail = true // as warmFixture
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	f.engine.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	f.engine.WarmInterpreters, f.engine.WarmIdle = 2, time.Hour
	pool := f.engine.warm()
	waitWarm(t, pool, 2)
	pids := pool.readyPids()
	advance(59 * time.Minute)
	pool.reapIdle()
	if got := pool.readyPids(); !slices.Equal(got, pids) {
		t.Fatalf("reaped before the idle period: %v, had %v", got, pids)
	}
	advance(time.Minute)
	pool.reapIdle()
	if got := pool.readyPids(); len(got) != 0 {
		t.Fatalf("still ready after the idle period: %v", got)
	}
	for _, pid := range pids {
		if !gone(pid) {
			t.Errorf("idle process %d still exists", pid)
		}
	}
	// The next interpreted run starts afresh and refills the pool.
	res, err := f.engine.Run(context.Background(), Request{RawCommand: "hello a | other b", Cwd: f.dir})
	if err != nil || res.Stdout != "other b\n" || slices.Contains(pids, res.Pid) {
		t.Fatalf("run after the reap: %+v, %v", res.Result, err)
	}
	waitWarm(t, pool, 2)
}

// TestWarmCloseLeavesNothing: Close ends every warm process; none is left
// in /proc, and later runs start afresh.
func TestWarmCloseLeavesNothing(t *testing.T) {
	f, pool := warmFixture(t, 2, "$BIN/*")
	if _, err := f.engine.Run(context.Background(), Request{RawCommand: "hello a | other b", Cwd: f.dir}); err != nil {
		t.Fatal(err)
	}
	waitWarm(t, pool, 2)
	pids := pool.readyPids()
	if err := f.engine.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if !gone(pid) {
			t.Errorf("warm process %d still exists after Close", pid)
		}
	}
	if kids := warmChildren(t); len(kids) > 0 {
		t.Errorf("warm interpreters of this process left after Close: %v", kids)
	}
	res, err := f.engine.Run(context.Background(), Request{RawCommand: "hello a | other b", Cwd: f.dir})
	if err != nil || res.Stdout != "other b\n" || slices.Contains(pids, res.Pid) {
		t.Fatalf("run after Close: %+v, %v", res.Result, err)
	}
}

// warmChildren lists this process's children that are warm interpreters
// of this engine's tests (by /proc: parent and command line).
func warmChildren(t *testing.T) []int {
	t.Helper()
	var out []int
	for _, s := range procStats(t) {
		if len(s.fields) < 2 || s.fields[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(s.pid) + "/cmdline")
		if strings.Contains(string(cmdline), "--exechost-interp=v1\x00warm") {
			out = append(out, s.pid)
		}
	}
	return out
}

// TestWarmChangesNothing runs a table of requests (interpreted, direct,
// denied, refused, timed out, PTY, with environment) on an engine with
// warm interpreters and on one without, over the same approvals: every
// result but the pid, the duration and the private TMPDIR's name must be
// equal. Each warm run finds a ready process (the pool is filled first).
// (Under security=full everything is shell text and starts afresh.)
func TestWarmChangesNothing(t *testing.T) {
	f, pool := warmFixture(t, 1, "$BIN/*", "/usr/bin/*", "/bin/*")
	cold := NewEngine(f.engine.StateDir, policy.HostGateway, "gw")
	// Both confined by Landlock alone: the warm pool serves no jailed run.
	cold.PATH, cold.Home, cold.NoJail = f.engine.PATH, f.engine.Home, true
	t.Cleanup(func() { _ = cold.Close() })
	reqs := []Request{
		{RawCommand: "hello a | other b"}, {RawCommand: "hello a && other b; hello c"},
		{RawCommand: "cd / && pwd"}, {RawCommand: "pwd; hello"}, {RawCommand: "other x >/dev/null; hello y"},
		{RawCommand: "hello $(other z)"}, {RawCommand: "sh -c 'hello a; other b'"},
		{RawCommand: "printenv LC_ALL | cat", Env: map[string]string{"LC_ALL": "C"}},
		{RawCommand: "false || hello x"}, {RawCommand: "cat | wc -c"}, {RawCommand: "hello a 1>&2; true"},
		{RawCommand: "ls /nonexistent-exechost; hello"}, {RawCommand: "time nice hello 2>/dev/null"},
		{RawCommand: "for i in 1 2 3; do hello $i; done"}, {RawCommand: "printenv TMPDIR | cut -c1-18"},
		{RawCommand: "nope | hello"}, {RawCommand: "hello; nope"}, {RawCommand: "sleep 5 | sleep 6", TimeoutMs: 300},
		{RawCommand: "hello a | other b", PTY: true}, {RawCommand: "hello", Env: map[string]string{"LD_PRELOAD": "/x"}},
		{RawCommand: "env -i /usr/bin/printenv | wc -l"}, {RawCommand: "exit 3"}, {RawCommand: "hello | exit 4"},
	}
	tmp := regexp.MustCompile(`exechost-run-[0-9]+`)
	norm := func(r Result) Result {
		r.Pid, r.Duration = 0, 0
		// Tail interleaves stdout and stderr as the processes of a
		// pipeline happened to write them: compared stream by stream.
		r.Stdout, r.Stderr, r.Tail = tmp.ReplaceAllString(r.Stdout, "TMP"), tmp.ReplaceAllString(r.Stderr, "TMP"), ""
		return r
	}
	for _, req := range reqs {
		req.Cwd = f.dir
		want, werr := cold.Run(context.Background(), req)
		waitWarm(t, pool, 1)
		got, err := f.engine.Run(context.Background(), req)
		if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
			t.Errorf("%q: warm err %v, cold %v", req.RawCommand, err, werr)
			continue
		}
		if diff := cmp.Diff(norm(want), norm(got), cmpopts.IgnoreFields(policy.Decision{}, "Err")); diff != "" {
			t.Errorf("%q: (-cold +warm):\n%s", req.RawCommand, diff)
		}
	}
	pool.mu.Lock()
	handed := pool.handed
	pool.mu.Unlock()
	if handed < 15 {
		t.Errorf("only %d runs were warm; the comparison proves little", handed)
	}
}

// TestWarmDeadOneIsSkipped: a warm interpreter killed while it waited is
// not handed a run: the run goes to the next one (or starts afresh), and
// the dead one is reaped.
func TestWarmDeadOneIsSkipped(t *testing.T) {
	f, pool := warmFixture(t, 2, "$BIN/*")
	pids := pool.readyPids()
	fd, err := unix.PidfdOpen(pids[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Kill(pids[0], unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if exited, err := testproc.AwaitExit(fd, time.Minute); !exited || err != nil {
		t.Fatalf("the killed warm interpreter did not exit: %v", err)
	}
	res, err := f.engine.Run(context.Background(), Request{RawCommand: "hello a | other b", Cwd: f.dir})
	if err != nil || res.Stdout != "other b\n" || res.Pid != pids[1] {
		t.Fatalf("run: %+v, %v; want it in the second warm interpreter %d", res.Result, err, pids[1])
	}
	if !gone(pids[0]) {
		t.Errorf("the dead warm interpreter %d was not reaped", pids[0])
	}
}
