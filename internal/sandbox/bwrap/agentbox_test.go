//go:build linux

package bwrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/agent"
)

// The other tests of this package run with the default sandbox.agent=auto,
// so every isolation check in them (uid, capabilities, no_new_privs,
// network, read-only root, hidden host paths, Landlock, pids limit,
// timeouts) is made from inside a resident agent's sandbox. These tests
// cover what is specific to the agent.

// hostAgents lists the host pids of agents this test process started.
func hostAgents(t *testing.T) []int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, p := range procs {
		cmdline, err := os.ReadFile(p + "/cmdline")
		// The agent itself: argv is exactly [binary, Flag] (bwrap's and
		// the helper's command lines mention Flag too).
		args := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
		if err != nil || len(args) != 2 || args[1] != agent.Flag {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(p))
		if descendsFrom(pid, os.Getpid()) {
			out = append(out, pid)
		}
	}
	return out
}

// descendsFrom reports whether pid has ancestor among its parents.
func descendsFrom(pid, ancestor int) bool {
	for i := 0; i < 64 && pid > 1; i++ {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		i := bytes.LastIndexByte(b, ')')
		var state byte
		if _, err := fmt.Sscanf(string(b[i+1:]), " %c %d", &state, &pid); err != nil {
			return false
		}
		if pid == ancestor {
			return true
		}
	}
	return false
}

func TestAgentIsUsed(t *testing.T) {
	b, _ := open(t, nil)
	if err := b.AgentErr(); err != nil {
		t.Fatalf("the resident agent does not work here: %v", err)
	}
	run(t, b, sandbox.Request{Command: "echo kept > /tmp/t"})
	tests := []struct {
		name, session, want string
	}{
		{"one sandbox per scope: /tmp persists between commands", "", "kept\n"},
		{"another session has its own sandbox", "other", "fresh\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, b, sandbox.Request{SessionKey: tt.session, Command: "cat /tmp/t 2>/dev/null || echo fresh"})
			if res.Stdout != tt.want {
				t.Errorf("got %+v, want stdout %q", res, tt.want)
			}
		})
	}
	if n := len(hostAgents(t)); n != 2 {
		t.Errorf("agents running = %d, want 2 (one per session)", n)
	}
}

func TestAgentOff(t *testing.T) {
	b, _ := open(t, func(c *sandbox.Config) { c.Agent = sandbox.AgentOff })
	if b.AgentErr() == nil {
		t.Fatal("sandbox.agent=off still uses the agent")
	}
	run(t, b, sandbox.Request{Command: "echo kept > /tmp/t"})
	if res := run(t, b, sandbox.Request{Command: "cat /tmp/t 2>/dev/null || echo fresh"}); res.Stdout != "fresh\n" {
		t.Errorf("with the agent off, a command saw the previous one's /tmp: %+v", res)
	}
	if n := len(hostAgents(t)); n != 0 {
		t.Errorf("agents running with sandbox.agent=off: %d", n)
	}
}

// TestAgentChannelIsPrivate checks that nothing but the gateway can reach
// the agent: its only channel is a pipe pair (no socket), and the
// commands it runs, though the same user, cannot open its descriptors,
// read its environment or trace it.
func TestAgentChannelIsPrivate(t *testing.T) {
	b, _ := open(t, nil)
	run(t, b, sandbox.Request{Argv: []string{"true"}})
	agents := hostAgents(t)
	if len(agents) != 1 {
		t.Fatalf("agents = %v, want one", agents)
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", agents[0]))
	switch {
	case os.IsPermission(err) && os.Geteuid() != 0:
		// The agent is non-dumpable: not even its host user may look.
		t.Logf("agent descriptors not listable by uid %d (non-dumpable); the socket check needs root", os.Geteuid())
	case err != nil:
		t.Fatal(err)
	}
	for _, fd := range fds {
		target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", agents[0], fd.Name()))
		if strings.HasPrefix(target, "socket:") {
			t.Errorf("agent holds a socket (fd %s): the channel must be its stdio pipes only", fd.Name())
		}
	}
	pid := mainConn(b).Ready().PID
	for _, cmd := range []string{
		"echo x > /proc/%d/fd/0",
		"cat /proc/%d/fd/1 </dev/null",
		"cat /proc/%d/environ",
		"cat /proc/%d/mem",
		"ls /proc/%d/fd",
	} {
		c := fmt.Sprintf(cmd, pid)
		t.Run(c, func(t *testing.T) {
			res := run(t, b, sandbox.Request{Command: c, Timeout: 30 * time.Second})
			if res.Success || res.TimedOut {
				t.Errorf("from inside the sandbox %q succeeded: %+v", c, res)
			}
		})
	}
	if res := run(t, b, sandbox.Request{Argv: []string{"echo", "still fine"}}); res.Stdout != "still fine\n" {
		t.Errorf("agent after the attempts: %+v", res)
	}
}

func TestAgentKilledIsRecreated(t *testing.T) {
	t.Run("between commands", func(t *testing.T) {
		b, _ := open(t, nil)
		run(t, b, sandbox.Request{Command: "echo kept > /tmp/t"})
		conn := mainConn(b)
		for _, pid := range hostAgents(t) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		select {
		case <-conn.Done():
		case <-time.After(time.Minute):
			t.Fatal("timed out after a minute waiting for the killed agent's connection to close")
		}
		res := run(t, b, sandbox.Request{Command: "cat /tmp/t 2>/dev/null || echo fresh"})
		if res.Stdout != "fresh\n" {
			t.Errorf("after the agent was killed: %+v, want a new sandbox", res)
		}
	})
	t.Run("mid-command: an error, not a second run", func(t *testing.T) {
		b, stateDir := open(t, nil)
		run(t, b, sandbox.Request{Argv: []string{"true"}})
		pid := mainConn(b).Ready().PID
		_, err := b.Exec(context.Background(), sandbox.Request{AgentID: "main",
			Command: fmt.Sprintf("echo run >> /workspace/runs; kill -KILL %d; sleep 60", pid), Timeout: time.Minute})
		if !errors.Is(err, ErrSetup) || !errors.Is(err, agent.ErrDied) {
			t.Errorf("Exec whose agent died: %v, want ErrSetup wrapping agent.ErrDied", err)
		}
		if data, _ := os.ReadFile(filepath.Join(stateDir, "sandboxes", "main", "runs")); string(data) != "run\n" {
			t.Errorf("command ran %q, want once", data)
		}
		if res := run(t, b, sandbox.Request{Argv: []string{"echo", "next"}}); res.Stdout != "next\n" {
			t.Errorf("after the agent died: %+v", res)
		}
	})
	t.Run("only once", func(t *testing.T) {
		b, _ := open(t, nil)
		run(t, b, sandbox.Request{Argv: []string{"true"}})
		conn := mainConn(b)
		// The next sandbox's "agent" exits at once: the recreation fails
		// and the error says so, without another attempt.
		b.agentBin = "/bin/true"
		for _, pid := range hostAgents(t) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		select {
		case <-conn.Done():
		case <-time.After(time.Minute):
			t.Fatal("timed out after a minute waiting for the killed agent's connection to close")
		}
		_, err := b.Exec(context.Background(), sandbox.Request{AgentID: "main", Argv: []string{"true"}})
		if !errors.Is(err, ErrSetup) {
			t.Errorf("Exec when the sandbox cannot be recreated: %v, want ErrSetup", err)
		}
	})
}

func TestAgentIdleAndClose(t *testing.T) {
	b, _ := open(t, nil)
	run(t, b, sandbox.Request{Argv: []string{"true"}})
	if n := b.reapIdle(time.Now(), time.Hour); n != 0 {
		t.Fatalf("reaped %d fresh sandboxes", n)
	}
	if n := b.reapIdle(time.Now().Add(2*time.Hour), time.Hour); n != 1 {
		t.Fatalf("reaped %d idle sandboxes, want 1", n)
	}
	waitAgents(t, 0)
	if res := run(t, b, sandbox.Request{Argv: []string{"echo", "again"}}); res.Stdout != "again\n" {
		t.Errorf("exec after idle removal: %+v", res)
	}
	b.Close(context.Background())
	waitAgents(t, 0)
}

// waitAgents waits (with a deadline) until n agents of this process run.
func waitAgents(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(hostAgents(t)) != n {
		if time.Now().After(deadline) {
			t.Fatalf("agents = %v, want %d", hostAgents(t), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mainConn returns the agent connection of agent "main", session "".
func mainConn(b *Backend) *agent.Conn {
	return b.boxes.Lookup(sandbox.ScopeKey(b.cfg.Scope, sandbox.Request{AgentID: "main"})).Conn()
}
