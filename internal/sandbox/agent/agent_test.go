//go:build linux

package agent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/testproc"
)

// proc is an agent started from this test binary (which links the package,
// so Flag makes it the agent), outside any sandbox: these tests cover the
// protocol and process handling; the backends' tests cover isolation.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *bytes.Buffer
	exited chan struct{}
}

func startProc(t *testing.T) *proc { return startAs(t, Flag) }

// startAs starts this test binary with flag, and env added to the agent's.
func startAs(t *testing.T, flag string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], flag)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "BASE=from-agent"}, env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stdin: stdin, stdout: stdout, stderr: &bytes.Buffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	})
	return p
}

func connect(t *testing.T) (*Conn, *proc) {
	t.Helper()
	return connectTo(t, startProc(t))
}

// connectTo opens the channel to agent p.
func connectTo(t *testing.T, p *proc) (*Conn, *proc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, p.stdout, p.stdin, func() { p.stdin.Close() })
	if err != nil {
		t.Fatalf("Start: %v (agent stderr: %s)", err, p.stderr)
	}
	t.Cleanup(c.Close)
	return c, p
}

func run(t *testing.T, c *Conn, req Request) runner.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.Exec(ctx, req)
	if err != nil {
		t.Fatalf("Exec(%q): %v", req.Argv, err)
	}
	return res
}

func TestReady(t *testing.T) {
	c, p := connect(t)
	r := c.Ready()
	if r.PID != p.cmd.Process.Pid || r.UID != os.Getuid() || !r.NoDump {
		t.Errorf("ready = %+v, want pid %d, uid %d, non-dumpable", r, p.cmd.Process.Pid, os.Getuid())
	}
}

func TestExec(t *testing.T) {
	c, _ := connect(t)
	dir := t.TempDir()
	tests := []struct {
		name string
		req  Request
		want runner.Result
	}{
		{"argv", Request{Argv: []string{"echo", "a", "$HOME;"}}, runner.Result{Success: true, Stdout: "a $HOME;\n"}},
		{"exit code and stderr", Request{Argv: []string{"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}},
			runner.Result{ExitCode: 3, Stdout: "out\n", Stderr: "err\n"}},
		{"env overlay on the agent's own", Request{Argv: []string{"/bin/sh", "-c", `echo "$BASE $X"`}, Env: []string{"X=over"}},
			runner.Result{Success: true, Stdout: "from-agent over\n"}},
		{"overlay replaces", Request{Argv: []string{"/bin/sh", "-c", `echo "$BASE"`}, Env: []string{"BASE=replaced"}},
			runner.Result{Success: true, Stdout: "replaced\n"}},
		{"cwd", Request{Argv: []string{"pwd"}, Cwd: dir}, runner.Result{Success: true, Stdout: dir + "\n"}},
		{"not found", Request{Argv: []string{"no-such-program"}},
			runner.Result{ExitCode: 127, Stderr: "no-such-program: not found\n"}},
		{"killed by a signal", Request{Argv: []string{"/bin/sh", "-c", "kill -9 $$"}},
			runner.Result{ExitCode: 137, Error: "killed by signal killed"}},
		{"bytes that are not UTF-8 arrive unchanged", Request{Argv: []string{"printf", `\377\376`}},
			runner.Result{Success: true, Stdout: "\xff\xfe"}},
		{"stdin is empty", Request{Argv: []string{"cat"}}, runner.Result{Success: true}},
		{"no signal ignored or blocked", Request{Argv: []string{"/bin/sh", "-c", "grep -E '^Sig(Ign|Blk)' /proc/self/status"}},
			runner.Result{Success: true, Stdout: "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n"}},
		{"signals that end a command still do", Request{Argv: []string{"/bin/sh", "-c", "kill -TERM $$"}},
			runner.Result{ExitCode: 143, Error: "killed by signal terminated"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, c, tt.req)
			got.Tail, got.Duration = "", 0
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConcurrent(t *testing.T) {
	c, _ := connect(t)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := strings.Repeat("x", i*1000)
			res, err := c.Exec(context.Background(), Request{Argv: []string{"printf", want}})
			if err != nil || res.Stdout != want {
				t.Errorf("exec %d: %v, %d bytes", i, err, len(res.Stdout))
			}
		}()
	}
	testproc.WaitGroup(t, &wg, "the concurrent commands")
}

func TestOutputCap(t *testing.T) {
	c, _ := connect(t)
	res := run(t, c, Request{Argv: []string{"/bin/sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' x"}})
	if !res.Truncated || len(res.Stdout) > runner.MaxOutput+1+len(runner.TruncatedSuffix) || !strings.HasSuffix(res.Stdout, runner.TruncatedSuffix) {
		t.Errorf("truncated %v, %d bytes kept, want the cap %d", res.Truncated, len(res.Stdout), runner.MaxOutput)
	}
}

// alive reports whether any process still has marker in its command line.
func alive(marker string) []string {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []string
	for _, p := range procs {
		b, err := os.ReadFile(p)
		// cmdline separates arguments with NULs: "sleep 1234.5" is
		// "sleep\x001234.5\x00" for the sleep itself.
		if err == nil && bytes.Contains(bytes.ReplaceAll(b, []byte{0}, []byte{' '}), []byte(marker)) {
			out = append(out, p)
		}
	}
	return out
}

// killAll SIGKILLs every process carrying marker and waits until they
// are gone.
func killAll(t *testing.T, marker string) {
	t.Helper()
	for _, p := range alive(marker) {
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	waitGone(t, marker)
}

// waitGone waits (with a deadline) until no process carries marker.
func waitGone(t *testing.T, marker string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(alive(marker)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes left: %v", alive(marker))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTimeoutKillsTheProcessTree(t *testing.T) {
	c, _ := connect(t)
	marker := "sleep 1234.5"
	// A background child, one in a session of its own and one in the
	// foreground: all must die.
	res := run(t, c, Request{Argv: []string{"/bin/sh", "-c", "(" + marker + ") & setsid " + marker + " & " + marker + "; echo unreachable"}, Timeout: 500 * time.Millisecond})
	if !res.TimedOut || res.Success || res.ExitCode != -1 || strings.Contains(res.Stdout, "unreachable") {
		t.Fatalf("result = %+v, want a timeout", res)
	}
	waitGone(t, marker)
	if got := run(t, c, Request{Argv: []string{"echo", "next"}}); got.Stdout != "next\n" {
		t.Errorf("after a timeout: %+v", got)
	}
}

func TestCancelKillsTheCommand(t *testing.T) {
	c, _ := connect(t)
	marker := "sleep 1234.6"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, Request{Argv: []string{"/bin/sh", "-c", marker}})
		done <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for len(alive(marker)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("command never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Exec after cancel: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("timed out after a minute waiting for Exec to answer after its context was canceled")
	}
	waitGone(t, marker)
}

// TestForeignFrameIsRefused writes a well-formed exec frame without the
// key — what anything but the gateway holding the key could write — and
// checks that the agent runs nothing and exits.
func TestForeignFrameIsRefused(t *testing.T) {
	for _, name := range []string{"no hello", "after hello"} {
		t.Run(name, func(t *testing.T) {
			p := startProc(t)
			marker := filepath.Join(t.TempDir(), "ran")
			if name == "after hello" {
				key := bytes.Repeat([]byte{7}, keySize)
				hello := encode(request{Type: typeHello, Key: key})
				if err := writeFrame(p.stdin, frameMAC(key, 0, hello), hello); err != nil {
					t.Fatal(err)
				}
			}
			body := encode(request{Type: typeExec, ID: 1, Argv: []string{"/bin/sh", "-c", "touch " + marker}})
			forged := frameMAC(bytes.Repeat([]byte{9}, keySize), 1, body)
			if name == "no hello" {
				forged = frameMAC(bytes.Repeat([]byte{9}, keySize), 0, body)
			}
			if err := writeFrame(p.stdin, forged, body); err != nil {
				t.Fatal(err)
			}
			select {
			case <-p.exited:
			case <-time.After(time.Minute):
				t.Fatal("agent still running after a forged frame")
			}
			if _, err := os.Stat(marker); err == nil {
				t.Error("the forged command ran")
			}
			if !strings.Contains(p.stderr.String(), "protocol error") {
				t.Errorf("agent stderr = %q, want a protocol error", p.stderr)
			}
		})
	}
}

func TestReplayedFrameIsRefused(t *testing.T) {
	p := startProc(t)
	marker := filepath.Join(t.TempDir(), "runs")
	key := bytes.Repeat([]byte{7}, keySize)
	hello := encode(request{Type: typeHello, Key: key})
	body := encode(request{Type: typeExec, ID: 1, Argv: []string{"/bin/sh", "-c", "echo x >> " + marker}})
	mac := frameMAC(key, 1, body)
	for _, f := range [][2][]byte{{frameMAC(key, 0, hello), hello}, {mac, body}, {mac, body}} {
		if err := writeFrame(p.stdin, f[0], f[1]); err != nil {
			break // the agent may already be gone
		}
	}
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		t.Fatal("agent still running after a replayed frame")
	}
	if b, _ := os.ReadFile(marker); string(b) == "x\nx\n" {
		t.Error("the replayed command ran twice")
	}
}

func TestDeadAgent(t *testing.T) {
	t.Run("between commands: not started", func(t *testing.T) {
		c, p := connect(t)
		p.cmd.Process.Kill()
		<-c.Done()
		_, err := c.Exec(context.Background(), Request{Argv: []string{"true"}})
		if !errors.Is(err, ErrNotStarted) {
			t.Errorf("Exec on a dead agent: %v, want ErrNotStarted", err)
		}
	})
	t.Run("mid-command: died", func(t *testing.T) {
		c, p := connect(t)
		marker := filepath.Join(t.TempDir(), "started")
		// Here the agent runs without the pid namespace it has in a
		// sandbox (where its death ends every process inside), so its
		// orphaned command would outlive the test: end it.
		t.Cleanup(func() { killAll(t, "sleep 1234.7") })
		done := make(chan error, 1)
		go func() {
			_, err := c.Exec(context.Background(), Request{Argv: []string{"/bin/sh", "-c", "touch " + marker + "; sleep 1234.7"}})
			done <- err
		}()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := os.Stat(marker); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("command never started")
			}
			time.Sleep(10 * time.Millisecond)
		}
		p.cmd.Process.Kill()
		select {
		case err := <-done:
			if !errors.Is(err, ErrDied) {
				t.Errorf("Exec whose agent died: %v, want ErrDied", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("timed out after a minute waiting for Exec to answer after its agent was killed")
		}
	})
	t.Run("closing the channel ends the agent and its commands", func(t *testing.T) {
		c, p := connect(t)
		marker := "sleep 1234.8"
		go c.Exec(context.Background(), Request{Argv: []string{"/bin/sh", "-c", marker}})
		deadline := time.Now().Add(30 * time.Second)
		for len(alive(marker)) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("command never started")
			}
			time.Sleep(10 * time.Millisecond)
		}
		c.Close()
		select {
		case <-p.exited:
		case <-time.After(time.Minute):
			t.Fatal("agent still running after its input closed")
		}
		waitGone(t, marker)
	})
}

func TestCheckStatic(t *testing.T) {
	if err := CheckStatic("/bin/sh"); err == nil {
		t.Error("CheckStatic(/bin/sh) = nil, want dynamically linked")
	}
	if err := CheckStatic(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("CheckStatic(missing) = nil")
	}
}

func TestStartDial(t *testing.T) {
	listen := func(t *testing.T) (*net.UnixListener, string) {
		path := filepath.Join(t.TempDir(), "a.sock")
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		return ln, path
	}
	t.Run("commands travel over the socket; end of stdin ends the agent", func(t *testing.T) {
		p := startProc(t)
		ln, path := listen(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := StartDial(ctx, p.stdin, ln, path, func() { p.stdin.Close() })
		if err != nil {
			t.Fatalf("StartDial: %v (agent stderr: %s)", err, p.stderr)
		}
		if res := run(t, c, Request{Argv: []string{"echo", "dialled"}}); res.Stdout != "dialled\n" {
			t.Errorf("exec: %+v", res)
		}
		if _, err := net.Dial("unix", path); err == nil {
			t.Error("the socket still accepts connections after the agent's")
		}
		c.Close()
		select {
		case <-p.exited:
		case <-time.After(time.Minute):
			t.Fatal("agent still running after its stdin closed")
		}
	})
	t.Run("a connection without the key is refused", func(t *testing.T) {
		ln, path := listen(t)
		var sink bytes.Buffer
		go func() {
			nc, err := net.Dial("unix", path)
			if err != nil {
				return
			}
			defer nc.Close()
			body := encode(reply{Type: typeProof, Proof: bytes.Repeat([]byte{1}, macSize)})
			writeFrame(nc, nil, body)
			io.Copy(io.Discard, nc)
		}()
		_, err := StartDial(context.Background(), &sink, ln, path, func() {})
		if !errors.Is(err, ErrProtocol) {
			t.Errorf("StartDial with an impostor: %v, want ErrProtocol", err)
		}
	})
}
