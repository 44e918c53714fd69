package asksock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/runner"
)

// recordingExecutor is an Executor that records what reached it and
// answers with res/err.
type recordingExecutor struct {
	mu    sync.Mutex
	calls []bridge.SystemRunParams
	res   bridge.SystemRunResult
	err   error
}

func (r *recordingExecutor) Exec(ctx context.Context, req bridge.SystemRunParams) (bridge.SystemRunResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, req)
	return r.res, r.err
}

func (r *recordingExecutor) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

var sampleExec = bridge.SystemRunParams{
	Command: []string{"echo", "hi"}, RawCommand: "echo hi", Cwd: "/tmp",
	Env: map[string]string{"FOO": "bar"}, TimeoutMs: 5000, AgentID: "main",
	SessionKey: "s1", RunID: "run-1", Security: "allowlist", Ask: "on-miss", NodeID: "node-1",
}

func newExecFrame(challenge string, req bridge.SystemRunParams) frame {
	raw, _ := json.Marshal(req)
	f := frame{Type: TypeExec, ID: randomHex(8), TS: time.Now().UnixMilli(), Nonce: randomHex(16), Request: raw}
	f.HMAC = RequestMAC(testToken, challenge, f.Nonce, f.TS, f.Request)
	return f
}

func TestExecRoundTrip(t *testing.T) {
	want := bridge.SystemRunResult{ExitCode: 3, Success: false, Stdout: "out\x00\xff", Stderr: "err", Truncated: true}
	x := &recordingExecutor{res: want}
	ts := startServer(t, func(s *Server) { s.Exec = x })
	c := &ExecClient{SocketPath: ts.Path, Token: testToken}
	got, err := c.Exec(context.Background(), sampleExec)
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	want.Stdout = "out\x00\ufffd" // JSON carries strings as UTF-8
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("result (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]bridge.SystemRunParams{sampleExec}, x.calls); d != "" {
		t.Errorf("request reaching the executor (-want +got):\n%s", d)
	}
}

func TestExecLargeOutput(t *testing.T) {
	// Output at the cap, every byte escaped six-fold by JSON, must still
	// fit an exec-res frame.
	big := strings.Repeat("\x01", runner.MaxOutput)
	x := &recordingExecutor{res: bridge.SystemRunResult{Stdout: big, Truncated: true}}
	ts := startServer(t, func(s *Server) { s.Exec = x })
	c := &ExecClient{SocketPath: ts.Path, Token: testToken}
	got, err := c.Exec(context.Background(), sampleExec)
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if got.Stdout != big {
		t.Errorf("stdout: got %d bytes, want %d", len(got.Stdout), len(big))
	}
}

func TestExecErrors(t *testing.T) {
	tests := []struct {
		name      string
		req       func(bridge.SystemRunParams) bridge.SystemRunParams
		err       error
		wantCode  string
		wantMsg   string
		wantCalls int
	}{
		{name: "allowlist miss", err: fmt.Errorf("%w (allowlist-miss: /usr/bin/echo)", policy.ErrAllowlistMiss), wantCode: bridge.CodeDenied, wantMsg: "SYSTEM_RUN_DENIED: allowlist miss (allowlist-miss: /usr/bin/echo)", wantCalls: 1},
		{name: "disabled", err: fmt.Errorf("%w (security=deny)", policy.ErrDisabled), wantCode: bridge.CodeDenied, wantMsg: "SYSTEM_RUN_DISABLED: security=deny (security=deny)", wantCalls: 1},
		{name: "user denied", err: policy.ErrUserDenied, wantCode: bridge.CodeDenied, wantMsg: "SYSTEM_RUN_DENIED: user denied", wantCalls: 1},
		{name: "dangerous env", err: bridge.InvalidRequest(fmt.Errorf("%w: env LD_PRELOAD", runner.ErrDangerousEnv)), wantCode: bridge.CodeInvalidRequest, wantCalls: 1},
		{name: "other failure", err: errors.New("load approvals: boom"), wantCode: bridge.CodeInternal, wantMsg: "load approvals: boom", wantCalls: 1},
		{name: "session env", req: func(r bridge.SystemRunParams) bridge.SystemRunParams {
			r.Env = map[string]string{"display": ":9"}
			return r
		}, wantCode: bridge.CodeInvalidRequest, wantCalls: 0},
		{name: "no command", req: func(r bridge.SystemRunParams) bridge.SystemRunParams {
			r.Command, r.RawCommand = nil, " "
			return r
		}, wantCode: bridge.CodeInvalidRequest, wantCalls: 0},
		{name: "timeout out of range", req: func(r bridge.SystemRunParams) bridge.SystemRunParams {
			r.TimeoutMs = -1
			return r
		}, wantCode: bridge.CodeInvalidRequest, wantCalls: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := &recordingExecutor{err: tt.err}
			ts := startServer(t, func(s *Server) { s.Exec = x })
			req := sampleExec
			if tt.req != nil {
				req = tt.req(req)
			}
			c := &ExecClient{SocketPath: ts.Path, Token: testToken}
			_, err := c.Exec(context.Background(), req)
			var xe *bridge.Error
			if !errors.As(err, &xe) {
				t.Fatalf("Exec error %v, want an *bridge.Error", err)
			}
			if xe.Code != tt.wantCode {
				t.Errorf("code %q, want %q (message %q)", xe.Code, tt.wantCode, xe.Message)
			}
			if tt.wantMsg != "" && xe.Message != tt.wantMsg {
				t.Errorf("message %q, want %q", xe.Message, tt.wantMsg)
			}
			if ExecNotRun(err) {
				t.Errorf("a signed refusal must not count as unreachable (it would trigger the fallback)")
			}
			if got := x.count(); got != tt.wantCalls {
				t.Errorf("executor called %d times, want %d", got, tt.wantCalls)
			}
		})
	}
}

// TestExecFramesRefused sends hand-made exec frames that must be refused
// before anything runs.
func TestExecFramesRefused(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(f *frame, challenge string)
		code   string
	}{
		{"bad hmac", func(f *frame, _ string) { f.HMAC = strings.Repeat("ab", 32) }, CodeInvalidAuth},
		{"missing hmac", func(f *frame, _ string) { f.HMAC = "" }, CodeInvalidAuth},
		{"hmac for another challenge", func(f *frame, _ string) {
			f.HMAC = RequestMAC(testToken, strings.Repeat("0", 32), f.Nonce, f.TS, f.Request)
		}, CodeInvalidAuth},
		{"request changed after signing", func(f *frame, _ string) {
			f.Request = json.RawMessage(`{"command":["rm","-rf","/"]}`)
		}, CodeInvalidAuth},
		{"stale ts", func(f *frame, c string) {
			f.TS -= MaxSkewMillis + 5000
			f.HMAC = RequestMAC(testToken, c, f.Nonce, f.TS, f.Request)
		}, CodeExpired},
		{"future ts", func(f *frame, c string) {
			f.TS += MaxSkewMillis + 5000
			f.HMAC = RequestMAC(testToken, c, f.Nonce, f.TS, f.Request)
		}, CodeExpired},
		{"bad nonce", func(f *frame, c string) {
			f.Nonce = "zz"
			f.HMAC = RequestMAC(testToken, c, f.Nonce, f.TS, f.Request)
		}, CodeBadRequest},
		{"request not an object", func(f *frame, c string) {
			f.Request = json.RawMessage(`["ls"]`)
			f.HMAC = RequestMAC(testToken, c, f.Nonce, f.TS, f.Request)
		}, CodeBadRequest},
		{"malformed request", func(f *frame, c string) {
			f.Request = json.RawMessage(`{"command":"ls"}`)
			f.HMAC = RequestMAC(testToken, c, f.Nonce, f.TS, f.Request)
		}, CodeBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := &recordingExecutor{}
			ts := startServer(t, func(s *Server) { s.Exec = x })
			rc := dialRaw(t, ts.Path)
			f := newExecFrame(rc.challenge, sampleExec)
			tt.tamper(&f, rc.challenge)
			rc.send(f.rawBytes())
			var ef ErrorFrame
			rc.readInto(&ef)
			if ef.Type != TypeError || ef.Code != tt.code {
				t.Errorf("got %+v, want error %s", ef, tt.code)
			}
			ts.stop()
			if n := x.count(); n != 0 {
				t.Errorf("executor ran %d times", n)
			}
		})
	}
}

func TestExecReplay(t *testing.T) {
	x := &recordingExecutor{res: bridge.SystemRunResult{Success: true}}
	ts := startServer(t, func(s *Server) { s.Exec = x })
	rc := dialRaw(t, ts.Path)
	f := newExecFrame(rc.challenge, sampleExec)
	rc.send(f.rawBytes())
	var res ExecResFrame
	rc.readInto(&res)
	if res.Type != TypeExecRes || !res.OK || res.ID != f.ID {
		t.Fatalf("first copy: %+v", res)
	}
	if !macEqual(res.HMAC, ExecResultMAC(testToken, rc.challenge, f.ID, res.Payload)) {
		t.Errorf("exec-res hmac does not verify")
	}
	f2 := f
	f2.ID = randomHex(8) // a new id does not make an old nonce new
	for _, again := range []frame{f, f2} {
		rc.send(again.rawBytes())
		var ef ErrorFrame
		rc.readInto(&ef)
		if ef.Code != CodeReplay {
			t.Errorf("replay: got %+v, want %s", ef, CodeReplay)
		}
	}
	ts.stop()
	if n := x.count(); n != 1 {
		t.Errorf("executor ran %d times, want 1", n)
	}
}

func TestExecOversize(t *testing.T) {
	x := &recordingExecutor{}
	ts := startServer(t, func(s *Server) { s.Exec = x })
	rc := dialRaw(t, ts.Path)
	req := sampleExec
	req.Env = map[string]string{"BIG": strings.Repeat("x", MaxFrame)}
	rc.send(newExecFrame(rc.challenge, req).rawBytes())
	var ef ErrorFrame
	rc.readInto(&ef)
	if ef.Code != CodeTooLarge {
		t.Errorf("got %+v, want %s", ef, CodeTooLarge)
	}
	if _, err := rc.readLine(); !errors.Is(err, io.EOF) {
		t.Errorf("after too-large: %v, want the connection closed", err)
	}
	ts.stop()
	if n := x.count(); n != 0 {
		t.Errorf("executor ran %d times", n)
	}
}

func TestExecNotAnExecHost(t *testing.T) {
	ts := startServer(t, nil)
	c := &ExecClient{SocketPath: ts.Path, Token: testToken}
	_, err := c.Exec(context.Background(), sampleExec)
	if !errors.Is(err, prompt.ErrRefused) || !ExecNotRun(err) || !strings.Contains(err.Error(), "--exec-host") {
		t.Errorf("Exec on a prompt-only approver: %v, want a refusal naming --exec-host", err)
	}
}

func TestExecUnreachable(t *testing.T) {
	dir := shortDir(t)
	tests := []struct {
		name string
		c    ExecClient
	}{
		{"no socket", ExecClient{SocketPath: filepath.Join(dir, "none.sock"), Token: testToken}},
		{"no token", ExecClient{SocketPath: filepath.Join(dir, "none.sock")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.c.Exec(context.Background(), sampleExec)
			if !errors.Is(err, prompt.ErrUnreachable) || !ExecNotRun(err) {
				t.Errorf("Exec: %v, want prompt.ErrUnreachable", err)
			}
		})
	}
}

func TestExecWrongToken(t *testing.T) {
	x := &recordingExecutor{}
	ts := startServer(t, func(s *Server) { s.Exec = x })
	c := &ExecClient{SocketPath: ts.Path, Token: []byte("another-token")}
	_, err := c.Exec(context.Background(), sampleExec)
	if !errors.Is(err, prompt.ErrRefused) || !strings.Contains(err.Error(), CodeInvalidAuth) {
		t.Errorf("Exec with the wrong token: %v, want refused invalid-auth", err)
	}
	ts.stop()
	if n := x.count(); n != 0 {
		t.Errorf("executor ran %d times", n)
	}
}

// TestExecCanceledWithCaller checks that a caller giving up ends the
// command at the approver: the executor's context is canceled when the
// connection closes.
func TestExecCanceledWithCaller(t *testing.T) {
	started := make(chan struct{})
	ended := make(chan error, 1)
	ts := startServer(t, func(s *Server) {
		s.Exec = ExecutorFunc(func(ctx context.Context, req bridge.SystemRunParams) (bridge.SystemRunResult, error) {
			close(started)
			<-ctx.Done()
			ended <- ctx.Err()
			return bridge.SystemRunResult{}, ctx.Err()
		})
	})
	c := &ExecClient{SocketPath: ts.Path, Token: testToken}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	_, err := c.Exec(ctx, sampleExec)
	if !errors.Is(err, prompt.ErrTimeout) || ExecNotRun(err) {
		t.Errorf("Exec canceled mid-run: %v, want prompt.ErrTimeout (may have run)", err)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("executor context ended with %v, want canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("timed out after a minute waiting for the executor's context to end after the caller gave up")
	}
}

// fakeExecApprover serves one connection on a real socket: hello, then reply
// computes the answer to the exec frame it reads.
func fakeExecApprover(t *testing.T, reply func(challenge string, f RequestFrame) []byte) string {
	t.Helper()
	path := filepath.Join(shortDir(t), "fake.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		const challenge = "00112233445566778899aabbccddeeff"
		fmt.Fprintf(c, `{"type":"hello","v":1,"challenge":%q}`+"\n", challenge)
		line, err := readLine(bufio.NewReader(c), MaxFrame)
		if err != nil {
			return
		}
		var f RequestFrame
		json.Unmarshal(line, &f)
		if out := reply(challenge, f); out != nil {
			c.Write(append(out, '\n'))
		}
	}()
	return path
}

func TestExecClientRejectsUnverifiable(t *testing.T) {
	payload := []byte(`{"exitCode":0,"timedOut":false,"success":true,"stdout":"ok","stderr":"","truncated":false}`)
	errBody := []byte(`{"code":"SYSTEM_RUN_DENIED","message":"SYSTEM_RUN_DENIED: user denied"}`)
	res := func(id string, ok bool, p, e []byte, mac string) []byte {
		b, _ := json.Marshal(ExecResFrame{Type: TypeExecRes, ID: id, OK: ok, Payload: p, Error: e, HMAC: mac})
		return b
	}
	tests := []struct {
		name  string
		reply func(ch string, f RequestFrame) []byte
		want  error
	}{
		{"wrong token", func(ch string, f RequestFrame) []byte {
			return res(f.ID, true, payload, nil, ExecResultMAC([]byte("other"), ch, f.ID, payload))
		}, prompt.ErrBadReply},
		{"hmac of another id", func(ch string, f RequestFrame) []byte {
			return res(f.ID, true, payload, nil, ExecResultMAC(testToken, ch, "other", payload))
		}, prompt.ErrBadReply},
		{"another id", func(ch string, f RequestFrame) []byte {
			return res("other", true, payload, nil, ExecResultMAC(testToken, ch, "other", payload))
		}, prompt.ErrBadReply},
		{"signed error relabelled ok", func(ch string, f RequestFrame) []byte {
			return res(f.ID, true, errBody, nil, ExecResultMAC(testToken, ch, f.ID, errBody))
		}, prompt.ErrBadReply},
		{"signed payload relabelled error", func(ch string, f RequestFrame) []byte {
			return res(f.ID, false, nil, payload, ExecResultMAC(testToken, ch, f.ID, payload))
		}, prompt.ErrBadReply},
		{"payload and error", func(ch string, f RequestFrame) []byte {
			return res(f.ID, true, payload, errBody, ExecResultMAC(testToken, ch, f.ID, payload))
		}, prompt.ErrBadReply},
		{"neither", func(ch string, f RequestFrame) []byte {
			return res(f.ID, true, nil, nil, ExecResultMAC(testToken, ch, f.ID, nil))
		}, prompt.ErrBadReply},
		{"a decision frame", func(ch string, f RequestFrame) []byte {
			b, _ := json.Marshal(DecisionFrame{Type: TypeDecision, ID: f.ID, Decision: "allow-once", HMAC: DecisionMAC(testToken, ch, f.ID, "allow-once")})
			return b
		}, prompt.ErrBadReply},
		{"garbage", func(string, RequestFrame) []byte { return []byte("{") }, prompt.ErrBadReply},
		{"closed without answer", func(string, RequestFrame) []byte { return nil }, prompt.ErrBadReply},
		{"error frame", func(_ string, f RequestFrame) []byte {
			return []byte(fmt.Sprintf(`{"type":"error","id":%q,"code":"replay","message":"x"}`, f.ID))
		}, prompt.ErrRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := fakeExecApprover(t, tt.reply)
			c := &ExecClient{SocketPath: path, Token: testToken}
			got, err := c.Exec(context.Background(), sampleExec)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Exec: %+v, %v; want %v", got, err, tt.want)
			}
			if notRun := errors.Is(tt.want, prompt.ErrRefused); ExecNotRun(err) != notRun {
				t.Errorf("ExecNotRun = %v, want %v", !notRun, notRun)
			}
		})
	}
}

func TestExecClientAcceptsSigned(t *testing.T) {
	payload := []byte(`{"exitCode":7,"timedOut":true,"success":false,"stdout":"a","stderr":"b","truncated":true,"future":1}`)
	path := fakeExecApprover(t, func(ch string, f RequestFrame) []byte {
		b, _ := json.Marshal(ExecResFrame{Type: TypeExecRes, ID: f.ID, OK: true, Payload: payload, HMAC: ExecResultMAC(testToken, ch, f.ID, payload)})
		return b
	})
	c := &ExecClient{SocketPath: path, Token: testToken}
	got, err := c.Exec(context.Background(), sampleExec)
	if err != nil {
		t.Fatal(err)
	}
	want := bridge.SystemRunResult{ExitCode: 7, TimedOut: true, Stdout: "a", Stderr: "b", Truncated: true}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("result (-want +got):\n%s", d)
	}
}

func TestBrokerPrompter(t *testing.T) {
	tests := []struct {
		name   string
		answer policy.Approval
		req    prompt.Request
		want   policy.Approval
		err    error
	}{
		{name: "allow once", answer: policy.AllowOnce, req: sampleRequest, want: policy.AllowOnce},
		{name: "deny", answer: policy.Reject, req: sampleRequest, want: policy.Reject},
		{name: "expired", req: prompt.Request{Command: "ls", ExpiresAtMs: time.Now().Add(-time.Second).UnixMilli()}, err: prompt.ErrTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := prompt.NewBroker()
			var peers atomic.Value
			if tt.answer != "" {
				decideAll(t, b, func(p prompt.Pending) (policy.Approval, string) {
					peers.Store(p.Peer)
					return tt.answer, "test ui"
				})
			}
			ctx := withExecPeer(context.Background(), "uid 1 pid 2")
			got, by, err := BrokerPrompter{Broker: b}.Prompt(ctx, tt.req)
			if !errors.Is(err, tt.err) {
				t.Fatalf("Prompt: %v, want %v", err, tt.err)
			}
			if got != tt.want {
				t.Errorf("answer %q, want %q", got, tt.want)
			}
			if tt.err == nil {
				if by != "test ui" {
					t.Errorf("by %q", by)
				}
				if p, _ := peers.Load().(string); p != "uid 1 pid 2 (exec host)" {
					t.Errorf("queued peer %q", p)
				}
			}
		})
	}
}
