package bwrap

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/testproc"
)

// reapSeen is what the beforeReap hook saw of a bwrap process.
type reapSeen struct {
	pid      int
	problem  string             // empty when it was this process's zombie
	exitCode syscall.WaitStatus // its wait status, from /proc
}

// watchReaps sets b's beforeReap hook and returns what it sees.
func watchReaps(b *Backend) <-chan reapSeen {
	seen := make(chan reapSeen, 8)
	f := func(pid int) { seen <- inspectZombie(pid) }
	b.beforeReap.Store(&f)
	return seen
}

// inspectZombie reads /proc/<pid>/stat: the state and parent, and the exit
// status in waitpid's form (its last field).
func inspectZombie(pid int) reapSeen {
	r := reapSeen{pid: pid}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		r.problem = fmt.Sprintf("bwrap %d is gone before its reap: %v", pid, err)
		return r
	}
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	ppid, _ := strconv.Atoi(string(f[1]))
	if string(f[0]) != "Z" || ppid != os.Getpid() {
		r.problem = fmt.Sprintf("bwrap %d is not this process's zombie: state %s, parent %d", pid, f[0], ppid)
	}
	code, _ := strconv.Atoi(string(f[len(f)-1]))
	r.exitCode = syscall.WaitStatus(code)
	return r
}

// TestBwrapReapedAfterLastKill: bwrap leads its sandbox's process group
// and is reaped only after the last kill of that group, so the kill cannot
// reach a group that took the id: at the reap it is still this process's
// zombie. Per command, a timeout's kill comes first (bwrap died of it);
// for a resident agent, closing its box kills the group, then reaps.
func TestBwrapReapedAfterLastKill(t *testing.T) {
	t.Run("timeout, agent off", func(t *testing.T) {
		b, _ := open(t, func(c *sandbox.Config) { c.Agent = sandbox.AgentOff })
		seen := watchReaps(b)
		res := run(t, b, sandbox.Request{Command: "sleep 1000 & wait", Timeout: time.Second})
		if !res.TimedOut {
			t.Fatalf("result %+v, want a timeout", res)
		}
		select {
		case r := <-seen:
			if r.problem != "" {
				t.Error(r.problem)
			}
			if !r.exitCode.Signaled() || r.exitCode.Signal() != syscall.SIGKILL {
				t.Errorf("bwrap %d ended with status %#x before its reap, want killed by SIGKILL", r.pid, int(r.exitCode))
			}
		default:
			t.Fatal("the timed-out bwrap was reaped without the hook (or by cmd.Wait at once)")
		}
	})
	t.Run("resident agent's box closed", func(t *testing.T) {
		b, _ := open(t, nil)
		if b.AgentErr() != nil {
			t.Fatalf("no resident agent: %v", b.AgentErr())
		}
		seen := watchReaps(b)
		run(t, b, sandbox.Request{Argv: []string{"true"}})
		agents := hostAgents(t)
		if len(agents) != 1 {
			t.Fatalf("agents %v, want one", agents)
		}
		box := childOfThis(agents[0])
		if err := b.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		// Sandboxes Open started and ended may be reaped first.
		for {
			r := testproc.Recv(t, seen, fmt.Sprintf("the closed box's bwrap %d reaped", box))
			if r.problem != "" {
				t.Error(r.problem)
			}
			if r.pid == box {
				break
			}
		}
	})
}

// childOfThis returns the ancestor of pid that is this process's child
// (the bwrap an agent runs under), or 0.
func childOfThis(pid int) int {
	for range 64 {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return 0
		}
		ppid, _ := strconv.Atoi(string(bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])[1]))
		if ppid == os.Getpid() {
			return pid
		}
		pid = ppid
	}
	return 0
}
