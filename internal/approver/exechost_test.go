//go:build unix

package approver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/approver"
	"github.com/exechost/exechost/internal/approverui"
	"github.com/exechost/exechost/internal/asksock"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/testdep"
	"github.com/exechost/exechost/internal/testproc"
)

// Environment of the helper approver process (TestHelperApprover).
const (
	envHelperDir  = "EXECHOST_APPHOST_HELPER_DIR"
	envHelperAuto = "EXECHOST_APPHOST_HELPER_AUTO"
)

// stateDir returns a fresh short 0700 state directory (socket paths are
// limited to ~104 bytes) whose exec-approvals.json has the given defaults
// and agent "*" allowlist.
func stateDir(t *testing.T, sec policy.Security, ask policy.Ask, fb policy.Fallback, allow ...string) (string, *approvals.File) {
	t.Helper()
	dir, err := os.MkdirTemp("", "ah")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := approvals.NewStore(dir).Update(func(f *approvals.File) error {
		f.Defaults.Security, f.Defaults.Ask, f.Defaults.AskFallback = string(sec), string(ask), string(fb)
		for _, p := range allow {
			f.AddPattern("*", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir, f
}

// serve runs an exec-host approver for dir in this process, the way
// `exechost approver --exec-host` does, until ctx ends. auto, when set,
// answers every prompt.
func serve(ctx context.Context, dir string, auto policy.Approval) (*asksock.Server, <-chan error, error) {
	st := approvals.NewStore(dir)
	f, err := st.Load()
	if err != nil {
		return nil, nil, err
	}
	b := prompt.NewBroker()
	srv := &asksock.Server{Path: st.SocketPath(f), Token: []byte(f.Socket.Token), Broker: b, Exec: approver.NewEngineExecutor(host.Options{StateDir: dir}, b)}
	if err := srv.Listen(); err != nil {
		return nil, nil, err
	}
	if auto != "" {
		go approverui.AutoDecide(ctx, b, auto, "test auto-decide")
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	return srv, done, nil
}

// startInProcess serves an exec-host approver for dir until the test ends
// and returns a client for it.
func startInProcess(t *testing.T, dir string, auto policy.Approval) *asksock.ExecClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, done, err := serve(ctx, dir, auto)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); testproc.Recv(t, done, "the exec-host approver to stop") })
	return &asksock.ExecClient{SocketPath: srv.Path, Token: srv.Token}
}

// TestHelperApprover is not a test: it is the approver process the
// subprocess tests start (re-running this test binary). It serves until its
// stdin closes, after printing "ready <DBUS_SESSION_BUS_ADDRESS>|<DISPLAY>".
func TestHelperApprover(t *testing.T) {
	dir := os.Getenv(envHelperDir)
	if dir == "" {
		t.Skip("helper process only")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { io.Copy(io.Discard, os.Stdin); cancel() }()
	_, done, err := serve(ctx, dir, policy.Approval(os.Getenv(envHelperAuto)))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Printf("ready %s|%s\n", os.Getenv("DBUS_SESSION_BUS_ADDRESS"), os.Getenv("DISPLAY"))
	if err := testproc.Recv(t, done, "the executor's result"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// helper is a running approver subprocess.
type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	ready string // what followed "ready "
}

// startHelper starts the approver subprocess for dir, wrapped in wrap (for
// example dbus-run-session --), with env added to a scrubbed environment,
// and waits for it to listen.
func startHelper(t *testing.T, dir string, auto policy.Approval, wrap []string, env ...string) *helper {
	t.Helper()
	argv := append(append([]string(nil), wrap...), os.Args[0], "-test.run=^TestHelperApprover$", "-test.v=false")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), envHelperDir + "=" + dir, envHelperAuto + "=" + string(auto)}, env...)
	// Stderr goes to a file, not a pipe: a daemon the wrapper started
	// (dbus-daemon) must not hold the test's output open.
	errf, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = errf
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, stdin: stdin}
	t.Cleanup(func() {
		// Closing stdin stops the helper, and with it the wrapper and its
		// daemons; kill only what does not stop.
		stdin.Close()
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(errf.Name())
			t.Logf("approver helper stderr:\n%s", b)
		}
		errf.Close()
	})
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
			h.ready = rest
			go io.Copy(io.Discard, stdout)
			return h
		}
		t.Logf("helper: %s", sc.Text())
	}
	t.Fatalf("approver helper exited before listening: %v", sc.Err())
	return nil
}

// scrubSessionEnv removes the desktop-session variables from this (the
// forwarding) process for the rest of the test, as a headless node
// service would have them.
func scrubSessionEnv(t *testing.T) {
	for _, name := range asksock.SessionEnv() {
		if v, ok := os.LookupEnv(name); ok {
			os.Unsetenv(name)
			t.Cleanup(func() { os.Setenv(name, v) })
		}
	}
}

// startXvfb starts a virtual display and returns its name (":N").
func startXvfb(t *testing.T) string {
	t.Helper()
	bin := testdep.Binary(t, "Xvfb")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-displayfd", "3", "-nolisten", "tcp", "-screen", "0", "320x240x24")
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	line, err := bufio.NewReader(r).ReadString('\n')
	r.Close()
	n, convErr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || convErr != nil {
		t.Fatalf("Xvfb did not report its display: %q, %v", line, err)
	}
	return ":" + strconv.Itoa(n)
}

// TestSessionContext is the environment test: an approver started
// under a real session bus and a virtual display runs a forwarded command
// with its own DISPLAY and DBUS_SESSION_BUS_ADDRESS, although the
// forwarding process has neither; the same command run without forwarding
// sees none.
func TestSessionContext(t *testing.T) {
	dbusRun := testdep.Binary(t, "dbus-run-session")
	dbusSend := testdep.Binary(t, "dbus-send")
	display := startXvfb(t)
	scrubSessionEnv(t)
	dir, _ := stateDir(t, policy.SecurityFull, policy.AskOff, policy.FallbackDeny)
	h := startHelper(t, dir, "", []string{dbusRun, "--"}, "DISPLAY="+display)
	bus, disp, _ := strings.Cut(h.ready, "|")
	if !strings.HasPrefix(bus, "unix:") || disp != display {
		t.Fatalf("helper session: bus %q display %q", bus, disp)
	}
	st := approvals.NewStore(dir)
	f, err := st.Load()
	if err != nil {
		t.Fatal(err)
	}
	c := &asksock.ExecClient{SocketPath: st.SocketPath(f), Token: []byte(f.Socket.Token)}
	const echo = `echo "$DBUS_SESSION_BUS_ADDRESS $DISPLAY"`

	ctx := context.Background()
	res, err := c.Exec(ctx, bridge.SystemRunParams{RawCommand: echo, AgentID: "main"})
	if err != nil {
		t.Fatalf("forwarded: %v", err)
	}
	if want := bus + " " + display + "\n"; res.Stdout != want || !res.Success {
		t.Errorf("forwarded output %q (success %v), want %q", res.Stdout, res.Success, want)
	}

	// The session is real, not just variables: the bus answers and the
	// display accepts a client.
	res, err = c.Exec(ctx, bridge.SystemRunParams{Command: []string{dbusSend, "--session", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.GetId"}})
	if err != nil || !res.Success {
		t.Errorf("session bus through the approver: %v, %+v", err, res)
	}
	if xdpy, err := exec.LookPath("xdpyinfo"); err == nil {
		res, err = c.Exec(ctx, bridge.SystemRunParams{Command: []string{xdpy}})
		if err != nil || !res.Success || !strings.Contains(res.Stdout, "name of display:") {
			t.Errorf("display through the approver: %v, %+v", err, res)
		}
	}

	// Without forwarding, the same command in this process sees nothing.
	local := host.NewEngine(dir, policy.HostNode, "node-1")
	lr, err := local.Run(ctx, host.Request{RawCommand: echo, AgentID: "main"})
	if err != nil {
		t.Fatalf("local: %v", err)
	}
	if lr.Stdout != " \n" {
		t.Errorf("local output %q, want no session variables", lr.Stdout)
	}
}

// TestSessionEnvRefused checks that a request cannot replace the
// approver's session variables or set variables that change what runs,
// and that nothing runs when it tries.
func TestSessionEnvRefused(t *testing.T) {
	dir, _ := stateDir(t, policy.SecurityFull, policy.AskOff, policy.FallbackDeny)
	c := startInProcess(t, dir, "")
	marker := filepath.Join(dir, "marker")
	for _, name := range []string{"DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "PATH", "LD_PRELOAD", "DYLD_INSERT_LIBRARIES", "NODE_OPTIONS", "PYTHONPATH", "PERL5LIB", "RUBYOPT", "BASH_ENV"} {
		t.Run(name, func(t *testing.T) {
			_, err := c.Exec(context.Background(), bridge.SystemRunParams{Command: []string{"/usr/bin/touch", marker}, Env: map[string]string{name: "x"}})
			var xe *bridge.Error
			if !errors.As(err, &xe) || xe.Code != bridge.CodeInvalidRequest {
				t.Errorf("env %s: %v, want %s", name, err, bridge.CodeInvalidRequest)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("env %s: the command ran", name)
			}
		})
	}
}

// TestPolicyAtApprover checks that the approver applies its approvals to
// forwarded commands: a miss with ask off is denied with the design's
// text, ask prompts in the approver's own queue, and an allowlisted command
// runs.
func TestPolicyAtApprover(t *testing.T) {
	tests := []struct {
		name     string
		sec      policy.Security
		ask      policy.Ask
		allow    []string
		auto     policy.Approval
		wantErr  error
		wantCode string
		wantRun  bool
	}{
		{name: "allowlist miss, ask off", sec: policy.SecurityAllowlist, ask: policy.AskOff, wantErr: policy.ErrAllowlistMiss, wantCode: bridge.CodeDenied},
		{name: "security deny", sec: policy.SecurityDeny, ask: policy.AskOff, wantErr: policy.ErrDisabled, wantCode: bridge.CodeDenied},
		{name: "allowlisted", sec: policy.SecurityAllowlist, ask: policy.AskOff, allow: []string{"/usr/bin/touch"}, wantRun: true},
		{name: "ask, approver allows", sec: policy.SecurityAllowlist, ask: policy.AskOnMiss, auto: policy.AllowOnce, wantRun: true},
		{name: "ask, approver denies", sec: policy.SecurityAllowlist, ask: policy.AskAlways, auto: policy.Reject, wantErr: policy.ErrUserDenied, wantCode: bridge.CodeDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, _ := stateDir(t, tt.sec, tt.ask, policy.FallbackDeny, tt.allow...)
			c := startInProcess(t, dir, tt.auto)
			// The marker is in the run's cwd: runs are confined away from
			// the state directory and, under allowlist, to their cwd.
			work := t.TempDir()
			marker := filepath.Join(work, "marker")
			res, err := c.Exec(context.Background(), bridge.SystemRunParams{Command: []string{"/usr/bin/touch", marker}, Cwd: work, AgentID: "main", NodeID: "node-1"})
			_, statErr := os.Stat(marker)
			if ran := statErr == nil; ran != tt.wantRun {
				t.Errorf("ran = %v, want %v (err %v)", ran, tt.wantRun, err)
			}
			if tt.wantErr == nil {
				if err != nil || !res.Success {
					t.Fatalf("Exec: %v, %+v", err, res)
				}
				return
			}
			var xe *bridge.Error
			if !errors.As(err, &xe) || xe.Code != tt.wantCode || !strings.HasPrefix(xe.Message, tt.wantErr.Error()) {
				t.Errorf("Exec: %v, want %s starting %q", err, tt.wantCode, tt.wantErr)
			}
		})
	}
}

// TestRequestedPolicyKept checks that the gateway's requested security
// travels with a forwarded command: the approver's full security does not
// loosen a request for deny.
func TestRequestedPolicyKept(t *testing.T) {
	dir, _ := stateDir(t, policy.SecurityFull, policy.AskOff, policy.FallbackDeny)
	c := startInProcess(t, dir, "")
	marker := filepath.Join(dir, "marker")
	req := host.Request{Argv: []string{"/usr/bin/touch", marker}, Security: policy.SecurityDeny}.Wire("node-1")
	_, err := c.Exec(context.Background(), req)
	var xe *bridge.Error
	if !errors.As(err, &xe) || xe.Code != bridge.CodeDenied {
		t.Errorf("Exec: %v, want %s", err, bridge.CodeDenied)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran")
	}
}

// rawExec is a hand-driven exec frame sender for abuse tests.
type rawExec struct {
	t         *testing.T
	c         net.Conn
	r         *bufio.Reader
	token     []byte
	challenge string
}

func dialExec(t *testing.T, c *asksock.ExecClient) *rawExec {
	t.Helper()
	conn, err := net.Dial("unix", c.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	re := &rawExec{t: t, c: conn, r: bufio.NewReaderSize(conn, 1<<20), token: c.Token}
	var hello asksock.Hello
	re.read(&hello)
	re.challenge = hello.Challenge
	return re
}

func (re *rawExec) read(v any) {
	re.t.Helper()
	re.c.SetReadDeadline(time.Now().Add(30 * time.Second)) // guards a hung test only
	line, err := re.r.ReadBytes('\n')
	if err != nil {
		re.t.Fatalf("read: %v", err)
	}
	if err := json.Unmarshal(line, v); err != nil {
		re.t.Fatalf("decode %q: %v", line, err)
	}
}

// frame returns a correctly signed exec frame for req; tamper may change
// it afterwards.
func (re *rawExec) frame(req bridge.SystemRunParams, tamper func(*asksock.RequestFrame)) []byte {
	raw, _ := json.Marshal(req)
	f := asksock.RequestFrame{Type: asksock.TypeExec, ID: fmt.Sprintf("id-%d", time.Now().UnixNano()), TS: time.Now().UnixMilli(), Nonce: strings.Repeat("0f", 16), Request: raw}
	f.HMAC = asksock.RequestMAC(re.token, re.challenge, f.Nonce, f.TS, f.Request)
	if tamper != nil {
		tamper(&f)
	}
	b, _ := json.Marshal(f)
	return append(b, '\n')
}

// TestForgedFramesRunNothing sends exec frames that must be refused, with a
// command that would leave a marker file, and checks that none ran.
func TestForgedFramesRunNothing(t *testing.T) {
	dir, _ := stateDir(t, policy.SecurityFull, policy.AskOff, policy.FallbackDeny)
	c := startInProcess(t, dir, "")
	work := t.TempDir() // not the state directory, which runs cannot write
	marker := filepath.Join(work, "marker")
	req := bridge.SystemRunParams{Command: []string{"/usr/bin/touch", marker}}
	tests := []struct {
		name   string
		tamper func(re *rawExec, f *asksock.RequestFrame)
		code   string
	}{
		{"bad hmac", func(_ *rawExec, f *asksock.RequestFrame) { f.HMAC = strings.Repeat("00", 32) }, asksock.CodeInvalidAuth},
		{"wrong token", func(re *rawExec, f *asksock.RequestFrame) {
			f.HMAC = asksock.RequestMAC([]byte("guess"), re.challenge, f.Nonce, f.TS, f.Request)
		}, asksock.CodeInvalidAuth},
		{"stale ts", func(re *rawExec, f *asksock.RequestFrame) {
			f.TS -= 60_000
			f.HMAC = asksock.RequestMAC(re.token, re.challenge, f.Nonce, f.TS, f.Request)
		}, asksock.CodeExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			re := dialExec(t, c)
			re.c.Write(re.frame(req, func(f *asksock.RequestFrame) { tt.tamper(re, f) }))
			var ef asksock.ErrorFrame
			re.read(&ef)
			if ef.Type != asksock.TypeError || ef.Code != tt.code {
				t.Errorf("got %+v, want error %s", ef, tt.code)
			}
		})
	}
	t.Run("oversize", func(t *testing.T) {
		re := dialExec(t, c)
		big := req
		big.Env = map[string]string{"PAD": strings.Repeat("x", asksock.MaxFrame)}
		re.c.Write(re.frame(big, nil))
		var ef asksock.ErrorFrame
		re.read(&ef)
		if ef.Code != asksock.CodeTooLarge {
			t.Errorf("got %+v, want %s", ef, asksock.CodeTooLarge)
		}
	})
	t.Run("replayed nonce", func(t *testing.T) {
		re := dialExec(t, c)
		count := filepath.Join(work, "count")
		once := bridge.SystemRunParams{Command: []string{"/bin/sh", "-c", `echo run >> "$0"`, count}}
		frame := re.frame(once, nil)
		re.c.Write(frame)
		var res asksock.ExecResFrame
		re.read(&res)
		if !res.OK {
			t.Fatalf("first copy: %+v", res)
		}
		re.c.Write(frame)
		var ef asksock.ErrorFrame
		re.read(&ef)
		if ef.Code != asksock.CodeReplay {
			t.Errorf("replay: %+v", ef)
		}
		if b, _ := os.ReadFile(count); string(b) != "run\n" {
			t.Errorf("count file %q, want one run", b)
		}
	})
	if _, err := os.Stat(marker); err == nil {
		t.Error("a refused frame ran its command")
	}
}

// TestApproverKilledMidRun checks that the caller gets a clear error (not
// a hang until its timeout, not a fallback) when the approver dies while
// the command runs.
func TestApproverKilledMidRun(t *testing.T) {
	dir, f := stateDir(t, policy.SecurityFull, policy.AskOff, policy.FallbackDeny)
	h := startHelper(t, dir, "", nil)
	started := filepath.Join(t.TempDir(), "started") // not in the state directory, which runs cannot write
	c := &asksock.ExecClient{SocketPath: approvals.NewStore(dir).SocketPath(f), Token: []byte(f.Socket.Token)}

	go func() {
		// Kill the approver once the command is running.
		for {
			if b, err := os.ReadFile(started); err == nil && strings.HasSuffix(string(b), "\n") {
				pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				h.cmd.Process.Kill()
				if pid > 0 {
					syscall.Kill(-pid, syscall.SIGKILL) // the orphaned command's group
				}
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := c.Exec(ctx, bridge.SystemRunParams{Command: []string{"/bin/sh", "-c", `echo $$ > "$0.tmp" && mv "$0.tmp" "$0" && exec sleep 60`, started}, TimeoutMs: 120_000})
	if !errors.Is(err, prompt.ErrBadReply) || asksock.ExecNotRun(err) {
		t.Fatalf("Exec with the approver killed: %v, want prompt.ErrBadReply (may have run)", err)
	}
	if ctx.Err() != nil {
		t.Errorf("the error came only at the caller's deadline: %v", err)
	}
	if !strings.Contains(err.Error(), "connection lost") {
		t.Errorf("error %q does not say the connection was lost", err)
	}
}
