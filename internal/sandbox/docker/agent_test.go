package docker

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
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

// TestAgentDynamicBinaryCarriesItsLoader: a dynamically linked exechost
// (a `go install` on a machine with a C compiler) still runs as the agent
// in an image without any C library: its loader and libraries are mounted
// read-only beside it and it starts through that loader.
func TestAgentDynamicBinaryCarriesItsLoader(t *testing.T) {
	bin := dockertest.DynamicAgentBinary(t)
	b, _ := open(t, func(c *sandbox.Config) { c.AgentBinary = bin })
	p := b.CommandPath()
	if p.Mode != sandbox.PathAgent || p.Binary != sandbox.BinaryCarriedLoader {
		t.Fatalf("command path = %+v, want the agent with a carried loader", p)
	}
	if res := run(t, b, sandbox.Request{Argv: []string{"echo", "via the agent"}}); res.Stdout != "via the agent\n" {
		t.Fatalf("through the dynamic agent: %+v", res)
	}
	ins := inspect(t, b).Container
	if len(ins.ExecIDs) != 0 {
		t.Errorf("the container has exec sessions %v: commands went through runc exec, not the agent", ins.ExecIDs)
	}
	// pid 1 is the carried loader running the agent, with the container's
	// restrictions as with a static binary.
	res := run(t, b, sandbox.Request{Command: "tr '\\0' ' ' </proc/1/cmdline; echo; grep -E '^(Uid|CapEff|NoNewPrivs)' /proc/1/status"})
	want := libMount + "/ld-linux-x86-64.so.2 --library-path " + libMount + " " + agentMount + " " + agent.Flag + " \nUid:\t65534\t65534\t65534\t65534\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\n"
	if runtime.GOARCH != "amd64" {
		want = res.Stdout // the loader's name differs; the rest is checked above
	}
	if diff := cmp.Diff(want, res.Stdout); diff != "" {
		t.Errorf("agent from inside (-want +got):\n%s", diff)
	}
	// The carried files are read-only, and the image itself still has no
	// C library: nothing was added to it.
	if res := run(t, b, sandbox.Request{Command: "echo x >> " + libMount + "/libc.so.6"}); res.Success {
		t.Errorf("a carried library is writable from inside")
	}
	if res := run(t, b, sandbox.Request{Command: "ls /lib /lib64 /usr/lib 2>&1 | grep -c libc"}); res.Stdout != "0\n" {
		t.Errorf("a C library outside %s: %+v", libMount, res)
	}
	// Timeouts are the agent's, as with a static binary.
	res = run(t, b, sandbox.Request{Command: "sleep 1000; echo unreachable", Timeout: time.Second})
	if !res.TimedOut || strings.Contains(res.Stdout, "unreachable") || res.Error != "" && strings.Contains(res.Error, "could not be killed") {
		t.Errorf("timed-out result = %+v", res)
	}
}

// TestAgentFallsBackToExec: a dynamically linked binary whose libraries
// are not on this host cannot be carried, so the backend uses runc exec,
// and says why.
func TestAgentFallsBackToExec(t *testing.T) {
	agentMode = false
	defer func() { agentMode = true }()
	bin := unresolvable(t)
	b, _ := open(t, func(c *sandbox.Config) { c.Agent = sandbox.AgentAuto; c.AgentBinary = bin })
	if err := b.AgentErr(); err == nil || !strings.Contains(err.Error(), "libq.so.9 not found") {
		t.Fatalf("AgentErr = %v, want the missing library named", err)
	}
	if p := b.CommandPath(); p.Mode != sandbox.PathPerCommand || !strings.Contains(p.Reason, "libq.so.9") {
		t.Errorf("command path = %+v", p)
	}
	if res := run(t, b, sandbox.Request{Argv: []string{"echo", "via exec"}}); res.Stdout != "via exec\n" {
		t.Errorf("exec fallback: %+v", res)
	}
}

// unresolvable returns a copy of /bin/sh whose libc dependency is renamed
// to a library no host has.
func unresolvable(t *testing.T) string {
	t.Helper()
	body, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dynstr := f.Section(".dynstr")
	if dynstr == nil {
		t.Fatal("/bin/sh has no .dynstr")
	}
	sec := body[dynstr.Offset : dynstr.Offset+dynstr.Size]
	i := bytes.Index(sec, []byte("\x00libc.so.6\x00"))
	if i < 0 {
		t.Fatalf("/bin/sh does not need libc.so.6")
	}
	// Same length, so no offset moves.
	copy(sec[i+1:], "libq.so.9")
	bin := filepath.Join(t.TempDir(), "sh")
	if err := os.WriteFile(bin, body, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
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

// keptLeaderProbe is run by a straggler that escaped a command's group
// and holds its output, in the container: it waits until the command's
// leader (pid in /tmp/a) is pid 1's zombie, makes an orphan and waits
// until pid 1 has reaped it, then writes to /tmp/verdict whether the
// leader was still kept. Each wait is bounded (10 s).
const keptLeaderProbe = `
state() { cut -d' ' -f3 /proc/$1/stat 2>/dev/null; }
bounded() { i=0; until eval "$1"; do i=$((i+1)); if [ $i -gt 1000 ]; then echo "timed out: $2" > /tmp/verdict; exit; fi; sleep 0.01; done; }
a=$(cat /tmp/a)
bounded '[ "$(state $a)" = Z ]' "the leader $a never became a zombie"
(sh -c 'echo $$ > /tmp/o' &)
bounded '[ -s /tmp/o ]' "the orphan never started"
o=$(cat /tmp/o)
bounded '[ -z "$(state $o)" ]' "the orphan $o was never reaped"
if [ "$(state $a)" = Z ]; then echo reaped-while-kept; else echo missed; fi > /tmp/verdict
`

// TestAgentKeepsLeaderWithoutStallingOrphans: inside a container, the
// agent (pid 1) keeps a command's leader a zombie while a straggler still
// holds its output (until its group's last kill), and meanwhile still
// reaps the orphans the kernel hands it. The straggler checks both from
// inside within the output grace; "missed" means the grace ended first (a
// very slow machine), and the check is made again.
func TestAgentKeepsLeaderWithoutStallingOrphans(t *testing.T) {
	b, _ := open(t, nil)
	for attempt := 1; ; attempt++ {
		run(t, b, sandbox.Request{Command: "rm -f /tmp/a /tmp/o /tmp/verdict"})
		res := run(t, b, sandbox.Request{Argv: []string{"sh", "-c", `echo $$ > /tmp/a; setsid sh -c "$0" & exit 0`, keptLeaderProbe}})
		if res.ExitCode != 0 {
			t.Fatalf("probe command: %+v", res)
		}
		var verdict string
		deadline := time.Now().Add(30 * time.Second)
		for verdict == "" {
			verdict = strings.TrimSpace(run(t, b, sandbox.Request{Command: "cat /tmp/verdict 2>/dev/null"}).Stdout)
			if verdict == "" && time.Now().After(deadline) {
				t.Fatal("the probe wrote no verdict within 30s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if verdict == "missed" && attempt < 3 {
			t.Logf("attempt %d: the output grace ended before the probe was done; again", attempt)
			continue
		}
		if verdict != "reaped-while-kept" {
			t.Fatalf("probe: %s; want the orphan reaped while the leader was kept", verdict)
		}
		break
	}
	// Nothing is left a zombie.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ps := run(t, b, sandbox.Request{Argv: []string{"ps", "-o", "stat,pid,args"}}).Stdout
		if !strings.Contains("\n"+ps, "\nZ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("zombies left in the container:\n%s", ps)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkDockerAgentCarriedLoader is BenchmarkDockerExecAPI with a
// dynamically linked exechost as the agent, started through its carried
// loader: the same fork and pipe round trip per command.
func BenchmarkDockerAgentCarriedLoader(b *testing.B) {
	bin := dockertest.DynamicAgentBinary(b)
	be, _ := open(b, func(c *sandbox.Config) { c.AgentBinary = bin })
	req := sandbox.Request{AgentID: "main", SessionKey: "bench", Argv: []string{"true"}}
	run(b, be, req)
	b.ResetTimer()
	for b.Loop() {
		if _, err := be.Exec(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
