package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/docker/dockertest"
	"github.com/exechost/exechost/internal/testproc"
)

// agentMode makes open use the resident agent (the default, with a static
// build of exechost as the agent); TestExecMode runs the core tests again
// with it off, through runc exec.
var agentMode = true

// open starts a backend on the busybox test image with a fresh state
// directory, closed at cleanup.
func open(t testing.TB, mutate func(*sandbox.Config)) (*Backend, string) {
	t.Helper()
	cli := dockertest.Client(t)
	image := dockertest.BuildImage(t, cli)
	stateDir := t.TempDir()
	cfg := sandbox.DefaultConfig()
	cfg = With(cfg, func(x *Config) { x.Image = image })
	cfg.IdleTimeout = sandbox.Duration(time.Hour)
	if agentMode {
		cfg.AgentBinary = dockertest.AgentBinary(t)
	} else {
		cfg.Agent = sandbox.AgentOff
	}
	if mutate != nil {
		mutate(&cfg)
	}
	b, err := Open(context.Background(), cfg, stateDir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if (b.AgentErr() == nil) != agentMode {
		t.Fatalf("agent mode %v, but AgentErr = %v", agentMode, b.AgentErr())
	}
	t.Cleanup(func() {
		if err := b.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b, stateDir
}

func run(t testing.TB, b *Backend, req sandbox.Request) runner.Result {
	t.Helper()
	if req.AgentID == "" {
		req.AgentID = "main"
	}
	if req.SessionKey == "" {
		req.SessionKey = "s1"
	}
	res, err := b.Exec(context.Background(), req)
	if err != nil {
		t.Fatalf("Exec(%q %q): %v", req.Argv, req.Command, err)
	}
	return res
}

// owned lists the containers carrying b's owner label.
func owned(t testing.TB, b *Backend) []string {
	t.Helper()
	f := client.Filters{}.Add("label", LabelOwner+"="+b.owner)
	list, err := dockertest.Client(t).ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	var ids []string
	for _, c := range list.Items {
		ids = append(ids, c.ID)
	}
	return ids
}

func TestExecOutputAndExitCode(t *testing.T) {
	b, _ := open(t, nil)
	// The shell killed by its own signal: runc exec's wrapper shell says
	// so on stderr; the agent reports the signal in Error.
	killed := runner.Result{ExitCode: 137, Stderr: "Killed\n"}
	if agentMode {
		killed = runner.Result{ExitCode: 137, Error: "killed by signal killed"}
	}
	tests := []struct {
		name string
		req  sandbox.Request
		want runner.Result
	}{
		{"argv", sandbox.Request{Argv: []string{"echo", "hello", "world"}},
			runner.Result{Success: true, Stdout: "hello world\n"}},
		{"argv is not shell text", sandbox.Request{Argv: []string{"echo", "$HOME;", "x"}},
			runner.Result{Success: true, Stdout: "$HOME; x\n"}},
		{"shell text with stderr and exit code", sandbox.Request{Command: "echo out; echo err >&2; exit 3"},
			runner.Result{ExitCode: 3, Stdout: "out\n", Stderr: "err\n"}},
		{"killed by a signal in a healthy container", sandbox.Request{Command: "kill -9 $$"}, killed},
		{"env", sandbox.Request{Command: `printf %s "$GREETING"`, Env: map[string]string{"GREETING": "hi there"}},
			runner.Result{Success: true, Stdout: "hi there"}},
		{"default cwd is the workspace", sandbox.Request{Argv: []string{"pwd"}},
			runner.Result{Success: true, Stdout: "/workspace\n"}},
		{"absolute cwd", sandbox.Request{Argv: []string{"pwd"}, Cwd: "/tmp"},
			runner.Result{Success: true, Stdout: "/tmp\n"}},
		{"runs as the unprivileged user", sandbox.Request{Command: "id -u; id -g"},
			runner.Result{Success: true, Stdout: "65534\n65534\n"}},
		{"no capabilities, no new privileges", sandbox.Request{Command: "grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status"},
			runner.Result{Success: true, Stdout: "CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, b, tt.req)
			got.Tail, got.Duration = "", 0
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMissingProgram(t *testing.T) {
	b, _ := open(t, nil)
	res := run(t, b, sandbox.Request{Argv: []string{"no-such-program"}})
	if res.ExitCode != 127 || !strings.Contains(res.Stderr, "no-such-program: not found") {
		t.Errorf("result = %+v, want exit 127 and a not-found message", res)
	}
}

func TestConcurrentExecsInOneScope(t *testing.T) {
	b, _ := open(t, nil)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := b.Exec(context.Background(), sandbox.Request{AgentID: "main", SessionKey: "s1", Argv: []string{"echo", fmt.Sprint(i)}})
			if err != nil {
				t.Errorf("Exec %d: %v", i, err)
				return
			}
			if res.Stdout != fmt.Sprintln(i) {
				t.Errorf("Exec %d: stdout %q", i, res.Stdout)
			}
		}()
	}
	testproc.WaitGroup(t, &wg, "the concurrent commands")
	if n := len(owned(t, b)); n != 1 {
		t.Errorf("containers for one scope = %d, want 1", n)
	}
}

func TestTimeoutKillsTheCommandNotTheContainer(t *testing.T) {
	b, _ := open(t, nil)
	run(t, b, sandbox.Request{Command: "echo keep > /tmp/marker"})
	before := owned(t, b)

	// A child in the background and one in the foreground: both must die.
	res := run(t, b, sandbox.Request{Command: "sleep 1000 & sleep 1001; echo unreachable", Timeout: time.Second})
	if !res.TimedOut || res.Success || strings.Contains(res.Stdout, "unreachable") {
		t.Fatalf("timed-out result = %+v, want TimedOut and no further output", res)
	}

	ps := run(t, b, sandbox.Request{Command: "ps -o pid,args"})
	if strings.Contains(ps.Stdout, "sleep 100") {
		t.Errorf("processes left after timeout:\n%s", ps.Stdout)
	}
	if got := run(t, b, sandbox.Request{Argv: []string{"cat", "/tmp/marker"}}).Stdout; got != "keep\n" {
		t.Errorf("container state after timeout: /tmp/marker = %q, want keep (was the container killed?)", got)
	}
	if diff := cmp.Diff(before, owned(t, b)); diff != "" {
		t.Errorf("containers changed by a timeout (-before +after):\n%s", diff)
	}
}

// TestTimeoutWithoutWritableTmp: the kill of a timed-out command writes
// nothing into the container, so it works when /tmp is full, and the
// result reports a kill only when one happened. (A full tmpfs still lets
// an empty file be created, so this passed on the pid-file kill too; the
// image whose /tmp the sandbox user cannot write at all is
// TestExecTimeoutWithLockedTmp.)
func TestTimeoutWithoutWritableTmp(t *testing.T) {
	b, _ := open(t, func(c *sandbox.Config) { *c = With(*c, func(x *Config) { x.TmpfsSize = "64k" }) })
	run(t, b, sandbox.Request{Command: "head -c 1048576 /dev/zero > /tmp/fill; echo x > /tmp/probe || echo full"})
	if got := run(t, b, sandbox.Request{Command: "echo x > /tmp/probe2 2>/dev/null || echo full"}).Stdout; got != "full\n" {
		t.Fatalf("/tmp is not full: %q", got)
	}
	// Another command's process in the same container must survive the
	// kill (an empty pid file once made it `kill -KILL -1`: everything).
	run(t, b, sandbox.Request{Command: "setsid sleep 999 </dev/null >/dev/null 2>&1 &"})
	res := run(t, b, sandbox.Request{Command: "sleep 1000 & sleep 1001; echo unreachable", Timeout: time.Second})
	if !res.TimedOut || res.Success || strings.Contains(res.Stdout, "unreachable") || strings.Contains(res.Error, "could not be killed") {
		t.Fatalf("timed-out result = %+v, want TimedOut and killed", res)
	}
	if strings.Contains(res.Stderr, "can't create") {
		t.Errorf("the sandbox wrote into the container to run the command: %q", res.Stderr)
	}
	ps := run(t, b, sandbox.Request{Command: "ps -o pid,args"})
	if strings.Contains(ps.Stdout, "sleep 100") {
		t.Errorf("processes left after timeout:\n%s", ps.Stdout)
	}
	if !strings.Contains(ps.Stdout, "sleep 999") {
		t.Errorf("the timeout's kill also killed another command's process:\n%s", ps.Stdout)
	}
}

// TestExecTimeoutWithLockedTmp is the first day's report: with docker exec
// (no agent) in an image whose /tmp the sandbox user cannot write, every
// command printed "can't create /tmp/.exechost-….pid", a timed-out
// command ran on, and the result said its group was killed. The timeout
// must be enforced without writing into the container, and the command's
// whole group must really be gone.
func TestExecTimeoutWithLockedTmp(t *testing.T) {
	agentMode = false
	defer func() { agentMode = true }()
	b, _ := open(t, func(c *sandbox.Config) {
		*c = With(*c, func(x *Config) { x.Image = dockertest.BuildLockedTmpImage(t, dockertest.Client(t)) })
	})
	if res := run(t, b, sandbox.Request{Command: "touch /tmp/probe"}); res.Success {
		t.Fatalf("/tmp is writable in %s; the test needs it locked: %+v", dockertest.LockedTmpImage, res)
	}
	if res := run(t, b, sandbox.Request{Argv: []string{"echo", "hi"}}); res.Stdout != "hi\n" || res.Stderr != "" {
		t.Errorf("a plain command: %+v, want only its own output", res)
	}
	res := run(t, b, sandbox.Request{Command: "sleep 1000 & sleep 1001; echo unreachable", Timeout: time.Second})
	if !res.TimedOut || res.Success || strings.Contains(res.Stdout, "unreachable") {
		t.Fatalf("timed-out result = %+v", res)
	}
	if res.Error != "" || res.ExitCode == -1 {
		t.Errorf("the timeout's kill did not happen: exit %d, %q", res.ExitCode, res.Error)
	}
	if strings.Contains(res.Stderr, "can't create") {
		t.Errorf("the sandbox wrote into the container to run the command: %q", res.Stderr)
	}
	// Reaped by the container's init a moment after the kill.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ps := run(t, b, sandbox.Request{Command: "ps -o stat,args"})
		if !strings.Contains(ps.Stdout, "sleep 100") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the timed-out command's group still runs:\n%s", ps.Stdout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestOutputCap(t *testing.T) {
	b, _ := open(t, nil)
	res := run(t, b, sandbox.Request{Command: "head -c 1048576 /dev/zero | tr '\\0' x; echo tail >&2"})
	if !res.Truncated {
		t.Errorf("Truncated = false after a 1 MB flood")
	}
	if max := runner.MaxOutput + len(runner.TruncatedSuffix) + 1; len(res.Stdout)+len(res.Stderr) > max {
		t.Errorf("kept %d bytes, want at most %d", len(res.Stdout)+len(res.Stderr), max)
	}
	if !strings.HasSuffix(res.Stdout, runner.TruncatedSuffix) {
		t.Errorf("stdout does not end with the truncation marker: …%q", res.Stdout[max(0, len(res.Stdout)-40):])
	}
	// The daemon copies stdout and stderr in separate goroutines, so
	// which stream's last bytes end the tail is not fixed.
	if n := len(res.Tail); n == 0 || n > runner.TailSize+len("…") {
		t.Errorf("tail is %d bytes, want 1..%d", n, runner.TailSize)
	}
}

func TestNetworkNone(t *testing.T) {
	b, _ := open(t, nil)
	res := run(t, b, sandbox.Request{Argv: []string{"cat", "/proc/net/dev"}})
	var ifaces []string
	for _, line := range strings.Split(res.Stdout, "\n")[2:] {
		if name, _, ok := strings.Cut(line, ":"); ok {
			ifaces = append(ifaces, strings.TrimSpace(name))
		}
	}
	if diff := cmp.Diff([]string{"lo"}, ifaces); diff != "" {
		t.Errorf("interfaces (-want +got):\n%s", diff)
	}
}

func TestFilesystem(t *testing.T) {
	b, stateDir := open(t, nil)
	tests := []struct {
		path string
		ok   bool
	}{
		{"/etc/written", false},
		{"/bin/written", false},
		{"/written", false},
		{"/workspace/written", true},
		{"/tmp/written", true},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			res := run(t, b, sandbox.Request{Argv: []string{"touch", tt.path}})
			if res.Success != tt.ok {
				t.Errorf("touch %s: success = %v, want %v (stderr %q)", tt.path, res.Success, tt.ok, res.Stderr)
			}
		})
	}
	if _, err := os.Stat(stateDir + "/sandboxes/main/written"); err != nil {
		t.Errorf("workspace file not on the host: %v", err)
	}
}

func TestWorkspacePathWithColon(t *testing.T) {
	root := t.TempDir() + "/work:space"
	b, _ := open(t, func(c *sandbox.Config) { c.Workspace = root })
	run(t, b, sandbox.Request{Command: "echo hi > /workspace/f"})
	if data, err := os.ReadFile(root + "/main/f"); err != nil || string(data) != "hi\n" {
		t.Errorf("workspace file: %q, %v", data, err)
	}
}

func TestScopes(t *testing.T) {
	b, _ := open(t, nil) // scope: session
	run(t, b, sandbox.Request{AgentID: "a", SessionKey: "s1", Command: "echo 1 > /tmp/t; echo 1 > /workspace/w"})
	tests := []struct {
		name, agent, session string
		want                 string
	}{
		{"same session keeps /tmp and workspace", "a", "s1", "tmp workspace"},
		{"other session of the agent shares only the workspace", "a", "s2", "workspace"},
		{"other agent shares nothing", "b", "s1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, b, sandbox.Request{AgentID: tt.agent, SessionKey: tt.session,
				Command: "r=; [ -e /tmp/t ] && r=tmp; [ -e /workspace/w ] && r=\"$r workspace\"; echo $r"})
			if got := strings.TrimSpace(res.Stdout); got != tt.want {
				t.Errorf("visible = %q, want %q", got, tt.want)
			}
		})
	}
	if n := len(owned(t, b)); n != 3 {
		t.Errorf("containers = %d, want 3 (one per session)", n)
	}
}

func TestSharedScope(t *testing.T) {
	b, _ := open(t, func(c *sandbox.Config) { c.Scope = sandbox.ScopeShared })
	run(t, b, sandbox.Request{AgentID: "a", SessionKey: "s1", Command: "echo 1 > /tmp/t; echo 1 > /workspace/w"})
	res := run(t, b, sandbox.Request{AgentID: "b", SessionKey: "s9", Command: "cat /tmp/t /workspace/w"})
	if res.Stdout != "1\n1\n" {
		t.Errorf("shared scope: got %+v", res)
	}
	if n := len(owned(t, b)); n != 1 {
		t.Errorf("containers = %d, want 1", n)
	}
}

func TestIdleCleanup(t *testing.T) {
	t.Run("reaper removes idle containers", func(t *testing.T) {
		b, _ := open(t, nil)
		run(t, b, sandbox.Request{Argv: []string{"true"}})
		if n := b.reapIdle(context.Background(), time.Now()); n != 0 {
			t.Fatalf("reaped %d fresh containers", n)
		}
		if n := b.reapIdle(context.Background(), time.Now().Add(2*time.Hour)); n != 1 {
			t.Fatalf("reaped %d, want 1", n)
		}
		if ids := owned(t, b); len(ids) != 0 {
			t.Fatalf("containers left after idle cleanup: %v", ids)
		}
		if res := run(t, b, sandbox.Request{Argv: []string{"echo", "again"}}); res.Stdout != "again\n" {
			t.Errorf("exec after cleanup: %+v", res)
		}
	})
	t.Run("idle loop", func(t *testing.T) {
		b, _ := open(t, func(c *sandbox.Config) { c.IdleTimeout = sandbox.Duration(200 * time.Millisecond) })
		run(t, b, sandbox.Request{Argv: []string{"true"}})
		deadline := time.Now().Add(60 * time.Second)
		for len(owned(t, b)) != 0 {
			if time.Now().After(deadline) {
				t.Fatal("idle container never removed")
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

func TestCloseRemovesContainers(t *testing.T) {
	b, _ := open(t, nil)
	run(t, b, sandbox.Request{Argv: []string{"true"}})
	run(t, b, sandbox.Request{SessionKey: "s2", Argv: []string{"true"}})
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ids := owned(t, b); len(ids) != 0 {
		t.Errorf("containers left after Close: %v", ids)
	}
	if _, err := b.Exec(context.Background(), sandbox.Request{AgentID: "main", Argv: []string{"true"}}); !errors.Is(err, ErrClosed) {
		t.Errorf("Exec after Close: %v, want ErrClosed", err)
	}
}

func TestOrphanCleanup(t *testing.T) {
	cli := dockertest.Client(t)
	image := dockertest.BuildImage(t, cli)
	stateDir := t.TempDir()
	ctx := context.Background()
	mk := func(owner string) string {
		res, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Config: &container.Config{Image: image, Cmd: keepalive,
				Labels: map[string]string{LabelSandbox: "1", LabelOwner: owner}},
			HostConfig: &container.HostConfig{NetworkMode: "none"},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.ContainerRemove(ctx, res.ID, client.ContainerRemoveOptions{Force: true}) })
		if _, err := cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
			t.Fatal(err)
		}
		return res.ID
	}
	// What a killed gateway leaves: a running container with our labels.
	orphan := mk(OwnerID(stateDir))
	other := mk(OwnerID(stateDir + "-another-gateway"))

	cfg := sandbox.DefaultConfig()
	cfg = With(cfg, func(x *Config) { x.Image = image })
	b, err := Open(ctx, cfg, stateDir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	if _, err := cli.ContainerInspect(ctx, orphan, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("orphan still present after Open (err %v)", err)
	}
	if _, err := cli.ContainerInspect(ctx, other, client.ContainerInspectOptions{}); err != nil {
		t.Errorf("another gateway's container was removed: %v", err)
	}
}

func TestContainerDiedIsRecreated(t *testing.T) {
	b, _ := open(t, nil)
	run(t, b, sandbox.Request{Argv: []string{"true"}})
	for _, id := range owned(t, b) {
		if _, err := dockertest.Client(t).ContainerKill(context.Background(), id, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
			t.Fatal(err)
		}
	}
	if res := run(t, b, sandbox.Request{Argv: []string{"echo", "back"}}); res.Stdout != "back\n" {
		t.Errorf("exec after the container died: %+v", res)
	}
}

func TestContainerDiedMidCommandIsNotRerun(t *testing.T) {
	b, stateDir := open(t, nil)
	marker := stateDir + "/sandboxes/main/runs"
	done := make(chan error, 1)
	go func() {
		_, err := b.Exec(context.Background(), sandbox.Request{AgentID: "main", SessionKey: "s1",
			Command: "echo run >> /workspace/runs; sleep 60"})
		done <- err
	}()
	for i := 0; ; i++ {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if i > 3000 {
			t.Fatal("command never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, id := range owned(t, b) {
		if _, err := dockertest.Client(t).ContainerKill(context.Background(), id, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrContainerDied) {
			t.Errorf("Exec whose container died: %v, want ErrContainerDied", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("timed out after a minute waiting for Exec to answer after its container was killed")
	}
	if data, _ := os.ReadFile(marker); string(data) != "run\n" {
		t.Errorf("command ran %q times, want once", data)
	}
	if res := run(t, b, sandbox.Request{Argv: []string{"echo", "next"}}); res.Stdout != "next\n" {
		t.Errorf("exec after the container died: %+v", res)
	}
}

func TestImageMissing(t *testing.T) {
	dockertest.Client(t)
	cfg := sandbox.DefaultConfig()
	cfg = With(cfg, func(x *Config) { x.Image = "exechost-no-such-image:never" })
	_, err := Open(context.Background(), cfg, t.TempDir())
	if !errors.Is(err, ErrImageMissing) || !strings.Contains(err.Error(), "docker pull exechost-no-such-image:never") {
		t.Errorf("Open with a missing image: %v, want ErrImageMissing with a hint", err)
	}
}

func TestDaemonUnreachable(t *testing.T) {
	cfg := sandbox.DefaultConfig()
	cfg = With(cfg, func(x *Config) { x.Host = "unix://" + t.TempDir() + "/no-docker.sock" })
	_, err := Open(context.Background(), cfg, t.TempDir())
	if !errors.Is(err, ErrDaemonUnreachable) || !strings.Contains(err.Error(), "hint:") {
		t.Errorf("Open with no daemon: %v, want ErrDaemonUnreachable with a hint", err)
	}
}

// TestDaemonRestart restarts the machine's dockerd mid-run, which disturbs
// anything else using it, so it runs only with EXECHOST_TEST_DOCKER_RESTART=1
// (as root, with scripts/provision-docker.sh next to the repository root).
func TestDaemonRestart(t *testing.T) {
	if os.Getenv("EXECHOST_TEST_DOCKER_RESTART") != "1" {
		t.Skip("restarts dockerd; set EXECHOST_TEST_DOCKER_RESTART=1 to run")
	}
	b, _ := open(t, nil)
	run(t, b, sandbox.Request{Argv: []string{"true"}})
	restartDockerd(t)
	res, err := b.Exec(context.Background(), sandbox.Request{AgentID: "main", SessionKey: "s1", Argv: []string{"echo", "after restart"}})
	if err != nil {
		t.Fatalf("Exec after daemon restart: %v", err)
	}
	if res.Stdout != "after restart\n" {
		t.Errorf("Exec after daemon restart: %+v", res)
	}
}

func restartDockerd(t *testing.T) {
	t.Helper()
	pidb, err := os.ReadFile("/var/run/docker.pid")
	if err != nil {
		t.Fatalf("find dockerd: %v", err)
	}
	pid := strings.TrimSpace(string(pidb))
	if out, err := exec.Command("kill", "-TERM", pid).CombinedOutput(); err != nil {
		t.Fatalf("stop dockerd: %v %s", err, out)
	}
	for i := 0; exec.Command("kill", "-0", pid).Run() == nil; i++ {
		if i > 600 {
			t.Fatal("dockerd did not stop")
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, err := exec.Command("../../../scripts/provision-docker.sh").CombinedOutput()
	if err != nil {
		t.Fatalf("start dockerd: %v\n%s", err, out)
	}
}

// TestExecMode runs the core tests with sandbox.agent=off: one runc exec
// per command, the fallback and the benchmark's baseline.
func TestExecMode(t *testing.T) {
	agentMode = false
	defer func() { agentMode = true }()
	for name, f := range map[string]func(*testing.T){
		"ExecOutputAndExitCode":                 TestExecOutputAndExitCode,
		"MissingProgram":                        TestMissingProgram,
		"TimeoutKillsTheCommandNotTheContainer": TestTimeoutKillsTheCommandNotTheContainer,
		"TimeoutWithoutWritableTmp":             TestTimeoutWithoutWritableTmp,
		"OutputCap":                             TestOutputCap,
		"NetworkNone":                           TestNetworkNone,
		"Filesystem":                            TestFilesystem,
		"ContainerDiedIsRecreated":              TestContainerDiedIsRecreated,
		"ContainerDiedMidCommandIsNotRerun":     TestContainerDiedMidCommandIsNotRerun,
	} {
		t.Run(name, f)
	}
}

// BenchmarkDockerExecAPI measures `true` in a warm container through the
// Engine API (what Exec does for every command).
func BenchmarkDockerExecAPI(b *testing.B) {
	be, _ := open(b, nil)
	req := sandbox.Request{AgentID: "main", SessionKey: "bench", Argv: []string{"true"}}
	run(b, be, req)
	b.ResetTimer()
	for b.Loop() {
		if _, err := be.Exec(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDockerExecCLI is the baseline: `docker exec <c> true` with the
// CLI binary in the same kind of warm container.
func BenchmarkDockerExecCLI(b *testing.B) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		b.Skip("docker CLI not installed; it is only the benchmark's baseline")
	}
	be, _ := open(b, nil)
	run(b, be, sandbox.Request{AgentID: "main", SessionKey: "bench", Argv: []string{"true"}})
	id := owned(b, be)[0]
	b.ResetTimer()
	for b.Loop() {
		if out, err := exec.Command(docker, "exec", "--user", sandbox.DefaultUser, id, "true").CombinedOutput(); err != nil {
			b.Fatalf("docker exec: %v %s", err, out)
		}
	}
}
