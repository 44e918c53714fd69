package docker

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/client"

	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/agent"
	"github.com/exechost/exechost/internal/sandbox/docker/dockertest"
)

// The other tests of this package run with the agent by default, so their
// checks from inside (uid, capabilities, no_new_privs, network, read-only
// root, workspace, timeouts, output cap, container death) go through it;
// TestExecMode repeats the core ones through runc exec. These tests cover
// what is specific to the agent.

// inspect returns the single container of b.
func inspect(t *testing.T, b *Backend) client.ContainerInspectResult {
	t.Helper()
	ids := owned(t, b)
	if len(ids) != 1 {
		t.Fatalf("containers = %v, want one", ids)
	}
	ins, err := dockertest.Client(t).ContainerInspect(context.Background(), ids[0], client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ins
}

func TestAgentIsUsed(t *testing.T) {
	b, _ := open(t, nil)
	run(t, b, sandbox.Request{Command: "echo kept > /tmp/t"})
	if res := run(t, b, sandbox.Request{Argv: []string{"cat", "/tmp/t"}}); res.Stdout != "kept\n" {
		t.Errorf("/tmp between commands: %+v", res)
	}
	ins := inspect(t, b).Container
	if len(ins.ExecIDs) != 0 {
		t.Errorf("the container has exec sessions %v: commands went through runc exec, not the agent", ins.ExecIDs)
	}
	if got := ins.HostConfig.LogConfig.Type; got != "none" {
		t.Errorf("log driver = %q, want none (command output must not land in docker's logs)", got)
	}
	// The agent is the container's pid 1, with the container's user and
	// restrictions: what it forks can get no more.
	res := run(t, b, sandbox.Request{Command: "grep -E '^(Uid|Gid|CapEff|CapBnd|NoNewPrivs)' /proc/1/status"})
	want := "Uid:\t65534\t65534\t65534\t65534\nGid:\t65534\t65534\t65534\t65534\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\n"
	if diff := cmp.Diff(want, res.Stdout); diff != "" {
		t.Errorf("agent's status from inside (-want +got):\n%s", diff)
	}
	// The binary is mounted read-only.
	if res := run(t, b, sandbox.Request{Command: "echo x >> " + agentMount}); res.Success {
		t.Errorf("the agent binary is writable from inside")
	}
}

// TestAgentFallsBackToExec: a dynamically linked binary cannot run in an
// image without a C library, so the backend uses runc exec.
func TestAgentFallsBackToExec(t *testing.T) {
	agentMode = false
	defer func() { agentMode = true }()
	b, _ := open(t, func(c *sandbox.Config) { c.Agent = sandbox.AgentAuto; c.AgentBinary = "/bin/sh" })
	if err := b.AgentErr(); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Fatalf("AgentErr = %v, want dynamically linked", err)
	}
	if res := run(t, b, sandbox.Request{Argv: []string{"echo", "via exec"}}); res.Stdout != "via exec\n" {
		t.Errorf("exec fallback: %+v", res)
	}
}

// TestAgentChannelIsPrivate: commands (the same user as the agent) cannot
// reach its channel, cannot kill it (it is the container's pid 1), and a
// second attachment writing a forged frame only ends the sandbox.
func TestAgentChannelIsPrivate(t *testing.T) {
	b, stateDir := open(t, nil)
	for _, c := range []string{
		"echo x > /proc/1/fd/0",
		"cat /proc/1/fd/1 </dev/null",
		"cat /proc/1/environ",
		"ls /proc/1/fd",
	} {
		t.Run(c, func(t *testing.T) {
			if res := run(t, b, sandbox.Request{Command: c, Timeout: 30 * time.Second}); res.Success || res.TimedOut {
				t.Errorf("from inside the sandbox %q succeeded: %+v", c, res)
			}
		})
	}
	t.Run("kill the agent from inside", func(t *testing.T) {
		res := run(t, b, sandbox.Request{Command: "kill -KILL 1; kill -TERM 1; sleep 0.2; echo alive"})
		if res.Stdout != "alive\n" {
			t.Errorf("after kill 1: %+v", res)
		}
		if res := run(t, b, sandbox.Request{Argv: []string{"echo", "still"}}); res.Stdout != "still\n" {
			t.Errorf("agent after kill attempts: %+v", res)
		}
	})
	t.Run("forged frame from a second attachment", func(t *testing.T) {
		id := owned(t, b)[0]
		att, err := dockertest.Client(t).ContainerAttach(context.Background(), id, client.ContainerAttachOptions{Stream: true, Stdin: true})
		if err != nil {
			t.Fatal(err)
		}
		defer att.Close()
		body := []byte(`{"t":"exec","id":99,"argv":["/bin/sh","-c","touch /workspace/forged"]}`)
		frame := make([]byte, 4+32+len(body))
		binary.BigEndian.PutUint32(frame, uint32(len(body)))
		copy(frame[4+32:], body)
		if _, err := att.Conn.Write(frame); err != nil {
			t.Fatal(err)
		}
		conn := boxConn(b, "s1")
		select {
		case <-conn.Done():
		case <-time.After(time.Minute):
			t.Fatal("agent still serving after a forged frame")
		}
		if _, err := os.Stat(stateDir + "/sandboxes/main/forged"); err == nil {
			t.Error("the forged command ran")
		}
		if res := run(t, b, sandbox.Request{Argv: []string{"echo", "recreated"}}); res.Stdout != "recreated\n" {
			t.Errorf("after the agent refused a forged frame: %+v", res)
		}
	})
}

func TestAgentTimeoutKillsTheTree(t *testing.T) {
	b, _ := open(t, nil)
	res := run(t, b, sandbox.Request{Command: "sleep 1000 & setsid sleep 1001 & (trap '' TERM HUP; sleep 1002) & sleep 1003; echo unreachable", Timeout: time.Second})
	if !res.TimedOut || res.Success || strings.Contains(res.Stdout, "unreachable") {
		t.Fatalf("timed-out result = %+v", res)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ps := run(t, b, sandbox.Request{Command: "ps -o pid,args"})
		if !strings.Contains(ps.Stdout, "sleep 100") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left after the timeout:\n%s", ps.Stdout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestAgentKilledFromOutsideIsRecreated(t *testing.T) {
	b, _ := open(t, nil)
	run(t, b, sandbox.Request{Command: "echo kept > /tmp/t"})
	conn := boxConn(b, "s1")
	// The container's init gets SIGKILL from outside its namespace.
	if _, err := dockertest.Client(t).ContainerKill(context.Background(), owned(t, b)[0], client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-conn.Done():
	case <-time.After(time.Minute):
		t.Fatal("dead agent not detected")
	}
	res := run(t, b, sandbox.Request{Command: "cat /tmp/t 2>/dev/null || echo fresh"})
	if res.Stdout != "fresh\n" {
		t.Errorf("after the agent was killed: %+v, want a new container", res)
	}
	if n := len(owned(t, b)); n != 1 {
		t.Errorf("containers = %d, want 1 (the dead one removed)", n)
	}
	if _, err := b.Exec(context.Background(), sandbox.Request{AgentID: "main", SessionKey: "s1", Argv: []string{"true"}, Cwd: "/no/such/dir"}); !errors.Is(err, agent.ErrStart) {
		t.Errorf("missing cwd: %v, want agent.ErrStart", err)
	}
}

// boxConn returns the agent connection of agent "main", session.
func boxConn(b *Backend, session string) *agent.Conn {
	return b.boxes.Lookup(sandbox.ScopeKey(b.cfg.Scope, sandbox.Request{AgentID: "main", SessionKey: session})).Conn()
}

// TestAgentReapsOrphans: the agent is the container's pid 1, so processes
// orphaned by commands become its children; it must reap them, or zombies
// would fill the pids limit.
func TestAgentReapsOrphans(t *testing.T) {
	b, _ := open(t, nil)
	for range 5 {
		run(t, b, sandbox.Request{Command: "(sleep 0.1 &) ; true"})
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ps := run(t, b, sandbox.Request{Argv: []string{"ps", "-o", "stat,args"}}).Stdout
		left := false
		for _, line := range strings.Split(ps, "\n") {
			f := strings.Fields(line)
			if len(f) >= 2 && (strings.HasPrefix(f[0], "Z") || strings.Join(f[1:], " ") == "sleep 0.1") {
				left = true
			}
		}
		if !left {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("zombies or orphans left:\n%s", ps)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
