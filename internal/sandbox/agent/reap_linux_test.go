package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/exechost/exechost/internal/reexec"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/testproc"
)

// reapHelperFlag starts this test binary as an agent that, like a
// container's pid 1, is handed every orphan of its commands (a child
// subreaper), and that checks each leader it is about to reap.
const reapHelperFlag = reexec.Prefix + "agent-reap-test"

// Environment of the reap helper: where it appends its reapRecords, and
// the output grace it uses.
const (
	reapLogEnv   = "EXECHOST_AGENT_REAP_LOG"
	reapGraceEnv = "EXECHOST_AGENT_REAP_GRACE"
)

// cldKilled is si_code CLD_KILLED (the child was killed by a signal;
// asm-generic/siginfo.h), which x/sys does not name.
const cldKilled = 2

// reapRecord is what the helper saw of a leader just before reaping it.
type reapRecord struct {
	Pid      int
	Problems []string
	Killed   bool // the leader itself died of SIGKILL
}

func init() {
	reexec.Register(reapHelperFlag, func() {
		reexec.Args(0, 0, "")
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			fmt.Fprintln(os.Stderr, "subreaper:", err)
			os.Exit(1)
		}
		log, err := os.OpenFile(os.Getenv(reapLogEnv), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		s := newServer(os.Stdout)
		if s.grace, err = time.ParseDuration(os.Getenv(reapGraceEnv)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		s.beforeReap = func(pid int) {
			b, _ := json.Marshal(inspectLeader(pid))
			log.Write(append(b, '\n'))
		}
		if err := s.serve(os.Stdin); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	})
}

// inspectLeader checks, in the helper, that leader pid is still its
// zombie, and that every other process of its group is dead or has a
// SIGKILL pending (the group was killed before the reap).
func inspectLeader(pid int) reapRecord {
	rec := reapRecord{Pid: pid}
	self := os.Getpid()
	found := false
	for _, p := range readProcs() {
		switch {
		case p.pid == pid:
			found = true
			if p.state != 'Z' || p.ppid != self {
				rec.Problems = append(rec.Problems, fmt.Sprintf("leader %d is not the agent's zombie: state %c, parent %d (agent %d)", pid, p.state, p.ppid, self))
			}
		case p.pgrp == pid:
			if p.state != 'Z' && p.state != 'X' && !sigkillPending(p.pid) {
				rec.Problems = append(rec.Problems, fmt.Sprintf("process %d of group %d is alive (state %c) with no SIGKILL pending", p.pid, pid, p.state))
			}
		}
	}
	if !found {
		rec.Problems = append(rec.Problems, fmt.Sprintf("leader %d is gone before its reap", pid))
	}
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err == nil {
		_, sig := sigchld(&info)
		rec.Killed = sig == int32(syscall.SIGKILL) && info.Code == cldKilled && info.Signo == int32(syscall.SIGCHLD)
	}
	return rec
}

// sigkillPending reports whether pid has SIGKILL pending (sent, not yet
// acted on).
func sigkillPending(pid int) bool {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return true // gone
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "SigPnd" && k != "ShdPnd") {
			continue
		}
		if mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && mask&(1<<(syscall.SIGKILL-1)) != 0 {
			return true
		}
	}
	return false
}

// reapAgent is a running reap helper.
type reapAgent struct {
	c    *Conn
	pid  int
	log  string
	seen int // records already returned by records
}

// startReapAgent starts the reap helper with the given output grace.
func startReapAgent(t *testing.T, grace time.Duration) *reapAgent {
	t.Helper()
	log := filepath.Join(t.TempDir(), "reaps")
	if err := os.WriteFile(log, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c, p := connectTo(t, startAs(t, reapHelperFlag, reapLogEnv+"="+log, reapGraceEnv+"="+grace.String()))
	return &reapAgent{c: c, pid: p.cmd.Process.Pid, log: log}
}

// records returns the helper's records written since the last call.
func (a *reapAgent) records(t *testing.T) []reapRecord {
	t.Helper()
	b, err := os.ReadFile(a.log)
	if err != nil {
		t.Fatal(err)
	}
	var out []reapRecord
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" || i < a.seen {
			continue
		}
		var r reapRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("record %q: %v", line, err)
		}
		out = append(out, r)
	}
	a.seen += len(out)
	return out
}

// zombies lists the helper's zombie children.
func (a *reapAgent) zombies() []int {
	var out []int
	for _, p := range readProcs() {
		if p.ppid == a.pid && p.state == 'Z' {
			out = append(out, p.pid)
		}
	}
	return out
}

// waitFor polls cond until it holds, failing the test after 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testproc.Poll(t, 30*time.Second, what, cond)
}

// TestLeaderKeptUntilLastKill: the agent reaps a command's leader only
// after the last kill of its group, so that kill cannot reach a group that
// took the id: at the reap the leader is still the agent's zombie and
// nothing of its group is left alive without a SIGKILL pending. The agent
// is a child subreaper here, as a container's pid 1 is handed every
// orphan.
func TestLeaderKeptUntilLastKill(t *testing.T) {
	a := startReapAgent(t, 200*time.Millisecond)
	tests := []struct {
		name string
		req  Request
		want func(t *testing.T, res runner.Result, rec reapRecord)
	}{
		{"straggler outside the group", Request{Argv: []string{"/bin/sh", "-c", "sleep 1000 & setsid sleep 1001 & echo $!"}},
			func(t *testing.T, res runner.Result, rec reapRecord) {
				if pid, err := strconv.Atoi(strings.TrimSpace(res.Stdout)); err == nil {
					t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
				} else {
					t.Errorf("stdout %q, want the straggler's pid", res.Stdout)
				}
				if res.ExitCode != 0 || rec.Killed {
					t.Errorf("result %+v, leader killed %v; want it to exit 0 by itself", res, rec.Killed)
				}
			}},
		{"timeout", Request{Argv: []string{"/bin/sh", "-c", "sleep 1000 & sleep 1001 & wait"}, Timeout: 500 * time.Millisecond},
			func(t *testing.T, res runner.Result, rec reapRecord) {
				if !res.TimedOut || !rec.Killed {
					t.Errorf("result %+v, leader killed %v; want a timeout that killed it", res, rec.Killed)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, a.c, tc.req)
			recs := a.records(t)
			if len(recs) != 1 {
				t.Fatalf("%d leaders checked before their reap (%+v); want one", len(recs), recs)
			}
			for _, p := range recs[0].Problems {
				t.Error(p)
			}
			tc.want(t, res, recs[0])
		})
	}
}

// TestOrphansReapedWhileLeaderKept: a leader kept as a zombie (its output
// still held by a background process) does not stop the agent reaping the
// orphans other commands leave it, and no zombie is left at the end.
func TestOrphansReapedWhileLeaderKept(t *testing.T) {
	a := startReapAgent(t, time.Minute)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	held := make(chan runner.Result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, _ := a.c.Exec(ctx, Request{Argv: []string{"/bin/sh", "-c", `echo $$ > "$0"; cat "$1" & exit 0`, filepath.Join(dir, "held"), fifo}})
		held <- res
	}()
	var leader int
	waitFor(t, "the held command's leader is the agent's zombie", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "held"))
		leader, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return leader > 0 && slices.Contains(a.zombies(), leader)
	})
	for i := range 5 {
		pidfile := filepath.Join(dir, "orphan"+strconv.Itoa(i))
		res := run(t, a.c, Request{Argv: []string{"/bin/sh", "-c", `(sh -c 'echo $$ > "$0"' "$0" &); true`, pidfile}})
		if res.ExitCode != 0 {
			t.Fatalf("orphan maker %d: %+v", i, res)
		}
		var orphan int
		waitFor(t, fmt.Sprintf("orphan %d is reaped", i), func() bool {
			b, _ := os.ReadFile(pidfile)
			orphan, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			// Gone, not merely not a zombie yet: reaped.
			return orphan > 0 && unix.Kill(orphan, 0) == unix.ESRCH
		})
	}
	if z := a.zombies(); len(z) != 1 || z[0] != leader {
		t.Errorf("the agent's zombies are %v while the held command runs; want only its leader %d", z, leader)
	}
	// Let the held output end: the command finishes and its leader is
	// reaped.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	select {
	case res := <-held:
		if res.ExitCode != 0 {
			t.Errorf("held command: %+v", res)
		}
	case <-time.After(time.Minute):
		t.Fatal("the held command did not finish within a minute of its output ending")
	}
	for _, r := range a.records(t) {
		for _, p := range r.Problems {
			t.Error(p)
		}
	}
	waitFor(t, "the agent has no zombie left", func() bool { return len(a.zombies()) == 0 })
}
