package node

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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/approver"
	"github.com/exechost/exechost/internal/asksock"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/testdep"
)

// fwdStateDir returns a fresh short 0700 state directory whose
// exec-approvals.json has the given defaults and agent "*" allowlist.
func fwdStateDir(t *testing.T, sec policy.Security, ask policy.Ask, allow ...string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err = approvals.NewStore(dir).Update(func(f *approvals.File) error {
		f.Defaults.Security, f.Defaults.Ask, f.Defaults.AskFallback = string(sec), string(ask), string(policy.FallbackDeny)
		for _, p := range allow {
			f.AddPattern("*", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// execClient returns the exec client a node with state dir dir uses.
func execClient(t *testing.T, dir string) *asksock.ExecClient {
	t.Helper()
	st := approvals.NewStore(dir)
	f, err := st.Load()
	if err != nil {
		t.Fatal(err)
	}
	return &asksock.ExecClient{SocketPath: st.SocketPath(f), Token: []byte(f.Socket.Token)}
}

// serveApprover runs an exec-host approver for dir (as `exechost approver
// --exec-host` does) until ctx ends.
func serveApprover(ctx context.Context, dir string) (<-chan error, error) {
	st := approvals.NewStore(dir)
	f, err := st.Load()
	if err != nil {
		return nil, err
	}
	b := prompt.NewBroker()
	srv := &asksock.Server{Path: st.SocketPath(f), Token: []byte(f.Socket.Token), Broker: b, Exec: approver.NewEngineExecutor(host.Options{StateDir: dir}, b)}
	if err := srv.Listen(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	return done, nil
}

// events records lifecycle events.
type events struct {
	mu  sync.Mutex
	got []bridge.ExecEvent
}

func (e *events) add(ev bridge.ExecEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, ev)
}

func (e *events) kinds() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var k []string
	for _, ev := range e.got {
		k = append(k, ev.Kind)
	}
	return k
}

// forwarder returns a node's forwarder for state dir approverDir's socket,
// with a local engine over localDir for the fallback.
func forwarder(t *testing.T, approverDir, localDir, fallback string) (*Forwarder, *events) {
	t.Helper()
	ev := &events{}
	return &Forwarder{
		Client:   execClient(t, approverDir),
		Local:    host.NewEngine(localDir, policy.HostNode, "node-1"),
		Fallback: fallback,
		NodeID:   func() string { return "node-1" },
		OnEvent:  ev.add,
	}, ev
}

func TestForwardRuns(t *testing.T) {
	dir := fwdStateDir(t, policy.SecurityFull, policy.AskOff)
	ctx, cancel := context.WithCancel(context.Background())
	done, err := serveApprover(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-done })
	fw, ev := forwarder(t, dir, dir, FallbackLocal)
	res, err := fw.Run(context.Background(), host.Request{Argv: []string{"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, RunID: "r1", SessionKey: "s1", AgentID: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" || res.Success {
		t.Errorf("result %+v", res.Result)
	}
	if d := cmp.Diff([]string{bridge.EventExecStarted, bridge.EventExecFinished}, ev.kinds()); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	fin := ev.got[1]
	if fin.ExitCode == nil || *fin.ExitCode != 3 || fin.RunID != "r1" || fin.NodeID != "node-1" || fin.Tail != "out\nerr\n" {
		t.Errorf("finished event %+v", fin)
	}
}

// TestForwardDenialStands checks that the approver's denial is final: the
// node reports the design's error (DENIED to the gateway), emits exec.denied
// and does not fall back to running the command itself.
func TestForwardDenialStands(t *testing.T) {
	dir := fwdStateDir(t, policy.SecurityAllowlist, policy.AskOff)
	localDir := fwdStateDir(t, policy.SecurityFull, policy.AskOff) // would allow it
	ctx, cancel := context.WithCancel(context.Background())
	done, err := serveApprover(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-done })
	fw, ev := forwarder(t, dir, localDir, FallbackLocal)
	marker := filepath.Join(localDir, "marker")
	r := &Client{opts: Options{Executor: fw}}
	params, _ := json.Marshal(host.Request{Argv: []string{"/usr/bin/touch", marker}, AgentID: "main", RunID: "r2"}.Wire(""))
	out := r.systemRun(context.Background(), params, 10_000)
	if out.OK || out.Error == nil || out.Error.Code != bridge.CodeDenied || !strings.HasPrefix(out.Error.Message, policy.ErrAllowlistMiss.Error()) {
		t.Errorf("system.run answer %+v %+v, want %s %q", out, out.Error, bridge.CodeDenied, policy.ErrAllowlistMiss)
	}
	if d := cmp.Diff([]string{bridge.EventExecDenied}, ev.kinds()); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the denied command ran in the node")
	}
}

func TestForwardFallback(t *testing.T) {
	tests := []struct {
		fallback string
		wantErr  error
		wantRun  bool
		events   []string
	}{
		{fallback: FallbackLocal, wantRun: true},
		{fallback: FallbackDeny, wantErr: ErrCompanionUnavailable, events: []string{bridge.EventExecFailed}},
		{fallback: "bogus", wantErr: ErrCompanionUnavailable, events: []string{bridge.EventExecFailed}},
	}
	for _, tt := range tests {
		t.Run(tt.fallback, func(t *testing.T) {
			dir := fwdStateDir(t, policy.SecurityFull, policy.AskOff) // no approver serves it
			fw, ev := forwarder(t, dir, dir, tt.fallback)
			marker := filepath.Join(t.TempDir(), "marker") // not in the state directory, which runs cannot write
			r := &Client{opts: Options{Executor: fw}}
			params, _ := json.Marshal(host.Request{Argv: []string{"/bin/sh", "-c", `touch "$0"; echo ran`, marker}, RunID: "r3"}.Wire(""))
			out := r.systemRun(context.Background(), params, 10_000)
			_, statErr := os.Stat(marker)
			if ran := statErr == nil; ran != tt.wantRun {
				t.Errorf("ran = %v, want %v", ran, tt.wantRun)
			}
			if d := cmp.Diff(tt.events, ev.kinds()); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
			if tt.wantErr != nil {
				if out.OK || !strings.HasPrefix(out.Error.Message, "COMPANION_APP_UNAVAILABLE: approver exec host unreachable") {
					t.Errorf("system.run answer %+v %+v, want COMPANION_APP_UNAVAILABLE", out, out.Error)
				}
				if got := ev.got[0].Reason; !strings.HasPrefix(got, tt.wantErr.Error()) {
					t.Errorf("denied event reason %q", got)
				}
				_, err := fw.Run(context.Background(), host.Request{Argv: []string{"/bin/true"}})
				if !errors.Is(err, ErrCompanionUnavailable) {
					t.Errorf("Run: %v, want ErrCompanionUnavailable", err)
				}
				return
			}
			var res host.Result
			if !out.OK || json.Unmarshal(sentPayload(t, out), &res) != nil {
				t.Fatalf("system.run answer %+v %+v", out, out.Error)
			}
			if res.Stdout != "ran\n" || !strings.HasPrefix(res.Stderr, fallbackNote+"\n") {
				t.Errorf("fallback result stdout %q stderr %q, want the fallback note first in stderr", res.Stdout, res.Stderr)
			}
		})
	}
}

// TestForwardLostNoFallback checks that a command handed to the approver
// is never run again locally when the connection is lost before its
// result: it may have run there.
func TestForwardLostNoFallback(t *testing.T) {
	dir := fwdStateDir(t, policy.SecurityFull, policy.AskOff)
	c := execClient(t, dir)
	ln, err := net.Listen("unix", c.SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		fmt.Fprintf(conn, `{"type":"hello","v":1,"challenge":"00112233445566778899aabbccddeeff"}`+"\n")
		bufio.NewReader(conn).ReadString('\n') // take the exec frame, then vanish
		conn.Close()
	}()
	fw, ev := forwarder(t, dir, dir, FallbackLocal)
	marker := filepath.Join(dir, "marker")
	_, err = fw.Run(context.Background(), host.Request{Argv: []string{"/usr/bin/touch", marker}})
	if !errors.Is(err, ErrForward) || !errors.Is(err, prompt.ErrBadReply) {
		t.Errorf("Run: %v, want ErrForward wrapping ErrBadReply", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran locally after it was handed to the approver")
	}
	if len(ev.kinds()) != 0 {
		t.Errorf("events %v, want none", ev.kinds())
	}
}

func TestParseExecSettings(t *testing.T) {
	for _, tt := range []struct {
		in        string
		host, fb  string
		hostError bool
		fbError   bool
	}{
		{in: "", host: ExecHostLocal, fb: FallbackLocal},
		{in: "app", host: ExecHostApp, fbError: true},
		{in: "local", host: ExecHostLocal, fb: FallbackLocal},
		{in: "deny", hostError: true, fb: FallbackDeny},
		{in: "App", hostError: true, fbError: true},
	} {
		h, err := ParseExecHost(tt.in)
		if (err != nil) != tt.hostError || (err == nil && h != tt.host) {
			t.Errorf("ParseExecHost(%q) = %q, %v", tt.in, h, err)
		}
		if err != nil && !errors.Is(err, policy.ErrInvalidValue) {
			t.Errorf("ParseExecHost(%q) error %v does not wrap ErrInvalidValue", tt.in, err)
		}
		fb, err := ParseExecFallback(tt.in)
		if (err != nil) != tt.fbError || (err == nil && fb != tt.fb) {
			t.Errorf("ParseExecFallback(%q) = %q, %v", tt.in, fb, err)
		}
	}
}

// Environment of the helper approver process (TestHelperExecHost).
const envFwdHelperDir = "EXECHOST_NODE_FWD_HELPER_DIR"

// TestHelperExecHost is not a test: it is the approver process
// TestForwardSessionContext starts (re-running this test binary). It
// serves until its stdin closes, after printing "ready".
func TestHelperExecHost(t *testing.T) {
	dir := os.Getenv(envFwdHelperDir)
	if dir == "" {
		t.Skip("helper process only")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { io.Copy(io.Discard, os.Stdin); cancel() }()
	done, err := serveApprover(ctx, dir)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Printf("ready %s|%s\n", os.Getenv("DBUS_SESSION_BUS_ADDRESS"), os.Getenv("DISPLAY"))
	<-done
	os.Exit(0)
}

// TestForwardSessionContext is the environment test at the node:
// a node executor in a process without DISPLAY or a session bus forwards
// to an approver started under dbus-run-session with an Xvfb display, and
// the command prints the approver's values; the node's own engine prints
// none.
func TestForwardSessionContext(t *testing.T) {
	dbusRun := testdep.Binary(t, "dbus-run-session")
	xvfb := testdep.Binary(t, "Xvfb")
	for _, name := range asksock.SessionEnv() {
		if v, ok := os.LookupEnv(name); ok {
			os.Unsetenv(name)
			t.Cleanup(func() { os.Setenv(name, v) })
		}
	}

	// A virtual display; -displayfd reports its number once it is ready.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	x := exec.Command(xvfb, "-displayfd", "3", "-nolisten", "tcp", "-screen", "0", "320x240x24")
	x.ExtraFiles = []*os.File{w}
	if err := x.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { x.Process.Signal(syscall.SIGTERM); x.Wait() })
	line, _ := bufio.NewReader(r).ReadString('\n')
	r.Close()
	n, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("Xvfb display number %q: %v", line, err)
	}
	display := ":" + strconv.Itoa(n)

	dir := fwdStateDir(t, policy.SecurityFull, policy.AskOff)
	errf, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(dbusRun, "--", os.Args[0], "-test.run=^TestHelperExecHost$")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), envFwdHelperDir + "=" + dir, "DISPLAY=" + display}
	cmd.Stderr = errf // a file: dbus-daemon must not hold a pipe of ours open
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
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
			t.Logf("approver stderr:\n%s", b)
		}
	})
	sc := bufio.NewScanner(stdout)
	var ready string
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
			ready = rest
			break
		}
	}
	if ready == "" {
		t.Fatalf("approver exited before listening: %v", sc.Err())
	}
	go io.Copy(io.Discard, stdout)
	bus, _, _ := strings.Cut(ready, "|")
	if !strings.HasPrefix(bus, "unix:") {
		t.Fatalf("approver's bus address %q", bus)
	}

	const echo = `echo "$DBUS_SESSION_BUS_ADDRESS $DISPLAY"`
	fw, _ := forwarder(t, dir, dir, FallbackDeny)
	res, err := fw.Run(context.Background(), host.Request{RawCommand: echo})
	if err != nil {
		t.Fatalf("forwarded: %v", err)
	}
	if want := bus + " " + display + "\n"; res.Stdout != want {
		t.Errorf("forwarded output %q, want %q", res.Stdout, want)
	}
	local, err := fw.Local.Run(context.Background(), host.Request{RawCommand: echo})
	if err != nil {
		t.Fatalf("local: %v", err)
	}
	if local.Stdout != " \n" {
		t.Errorf("local output %q, want no session variables", local.Stdout)
	}
}

// sentPayload is the payload of res as the gateway reads it: a run result
// is written into the answer's frame only when it is sent.
func sentPayload(t *testing.T, res bridge.InvokeResult) json.RawMessage {
	t.Helper()
	data, err := bridge.MarshalPayload(res)
	if err != nil {
		t.Fatal(err)
	}
	var back bridge.InvokeResult
	if err := bridge.Unmarshal(data, &back); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return back.Payload
}
