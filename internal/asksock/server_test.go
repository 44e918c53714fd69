package asksock

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/time/rate"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/testproc"
)

func TestRequestMACGolden(t *testing.T) {
	// Computed independently (Python hmac/hashlib) from the design's
	// byte-level definition.
	got := RequestMAC([]byte("secret-token"), "00112233445566778899aabbccddeeff", "ffeeddccbbaa99887766554433221100", 1700000000000, []byte(`{"command":"ls"}`))
	if want := "88706246bdc236359b28ea22e43c01d945c0340618e6ad3002277216f8fa3048"; got != want {
		t.Errorf("RequestMAC = %s, want %s", got, want)
	}
	got = DecisionMAC([]byte("secret-token"), "00112233445566778899aabbccddeeff", "id-1", "allow-once")
	if want := "cb9f699aaadf5e0141fab69686e0a378f868c578b5c3f5ee8246fe5940b1cf21"; got != want {
		t.Errorf("DecisionMAC = %s, want %s", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, a := range policy.Approvals() {
		t.Run(string(a), func(t *testing.T) {
			ts := startServer(t, nil)
			decideAll(t, ts.b, func(p prompt.Pending) (policy.Approval, string) {
				if diff := cmp.Diff(sampleRequest.Command, p.Request.Command); diff != "" {
					t.Errorf("queued command (-want +got):\n%s", diff)
				}
				return a, "approver test"
			})
			c := &Client{SocketPath: ts.Path, Token: testToken}
			got, by, err := c.Prompt(t.Context(), sampleRequest)
			if err != nil {
				t.Fatalf("Prompt: %v", err)
			}
			if got != a || by != "approver test" {
				t.Errorf("Prompt = %q by %q, want %q by %q", got, by, a, "approver test")
			}
		})
	}
}

// TestRawDecisionFrame checks the decision frame on the wire, byte-level
// hmac included, and that the queued prompt carries what was sent.
func TestRawDecisionFrame(t *testing.T) {
	ts := startServer(t, nil)
	var queued prompt.Pending
	decideAll(t, ts.b, func(p prompt.Pending) (policy.Approval, string) {
		queued = p
		return policy.AllowOnce, "approver test"
	})
	rc := dialRaw(t, ts.Path)
	f := newFrame(rc.challenge, sampleRequest)
	rc.send(f.bytes())
	var df DecisionFrame
	rc.readInto(&df)
	want := DecisionFrame{Type: TypeDecision, ID: f.ID, Decision: "allow-once", HMAC: DecisionMAC(testToken, rc.challenge, f.ID, "allow-once"), By: "approver test"}
	if diff := cmp.Diff(want, df); diff != "" {
		t.Errorf("decision frame (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sampleRequest, queued.Request); diff != "" {
		t.Errorf("queued request (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(queued.Peer, fmt.Sprintf("uid %d pid ", os.Getuid())) {
		t.Errorf("peer = %q", queued.Peer)
	}
}

// TestRequestHashCoversRawBytes: the hmac covers the request's bytes as
// sent, so a client that spaces its JSON differently still verifies.
func TestRequestHashCoversRawBytes(t *testing.T) {
	ts := startServer(t, nil)
	decideAll(t, ts.b, func(prompt.Pending) (policy.Approval, string) { return policy.AllowOnce, "x" })
	rc := dialRaw(t, ts.Path)
	f := newFrame(rc.challenge, sampleRequest)
	f.Request = json.RawMessage(`{ "command" : "ls",  "cwd":"/" }`)
	f.HMAC = RequestMAC(testToken, rc.challenge, f.Nonce, f.TS, f.Request)
	rc.send(f.rawBytes())
	var df DecisionFrame
	rc.readInto(&df)
	if df.Type != TypeDecision || df.ID != f.ID {
		t.Fatalf("got %+v, want a decision for %s", df, f.ID)
	}
}

// TestRefusedFrames sends one bad frame per connection and checks the
// error code; a valid request on the same connection afterwards proves the
// connection survived, and at the end only valid requests reached the
// queue.
func TestRefusedFrames(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name   string
		line   func(challenge string) []byte
		code   string
		closes bool
	}{
		{"garbage", func(string) []byte { return []byte("this is not json") }, CodeBadRequest, false},
		{"json array", func(string) []byte { return []byte(`[1,2,3]`) }, CodeBadRequest, false},
		{"wrong type", func(c string) []byte {
			f := newFrame(c, sampleRequest)
			f.Type = "decision"
			return f.bytes()
		}, CodeBadRequest, false},
		{"missing id", func(c string) []byte {
			f := newFrame(c, sampleRequest)
			f.ID = ""
			return f.bytes()
		}, CodeBadRequest, false},
		{"bad nonce", func(c string) []byte {
			f := newFrame(c, sampleRequest)
			f.Nonce = "abc"
			f.HMAC = RequestMAC(testToken, c, f.Nonce, f.TS, f.Request)
			return f.bytes()
		}, CodeBadRequest, false},
		{"request not an object", func(c string) []byte {
			f := newFrame(c, sampleRequest)
			f.Request = json.RawMessage(`"ls"`)
			f.HMAC = RequestMAC(testToken, c, f.Nonce, f.TS, f.Request)
			return f.bytes()
		}, CodeBadRequest, false},
		{"empty command", func(c string) []byte { return newFrame(c, prompt.Request{Cwd: "/"}).bytes() }, CodeBadRequest, false},
		{"missing hmac", func(c string) []byte {
			f := newFrame(c, sampleRequest)
			f.HMAC = ""
			return f.bytes()
		}, CodeInvalidAuth, false},
		{"bad hmac", func(c string) []byte {
			f := newFrame(c, sampleRequest)
			f.HMAC = strings.Repeat("0", 64)
			return f.bytes()
		}, CodeInvalidAuth, false},
		{"hmac not hex", func(c string) []byte {
			f := newFrame(c, sampleRequest)
			f.HMAC = "zz"
			return f.bytes()
		}, CodeInvalidAuth, false},
		{"wrong token", func(c string) []byte {
			f := newFrame(c, sampleRequest)
			f.HMAC = RequestMAC([]byte("other-token"), c, f.Nonce, f.TS, f.Request)
			return f.bytes()
		}, CodeInvalidAuth, false},
		{"other challenge", func(string) []byte { return newFrame(randomHex(16), sampleRequest).bytes() }, CodeInvalidAuth, false},
		{"request altered after signing", func(c string) []byte {
			f := newFrame(c, sampleRequest)
			f.Request = bytes.Replace(f.Request, []byte("ls -la"), []byte("rm -rf"), 1)
			return f.bytes()
		}, CodeInvalidAuth, false},
		{"request re-spaced after signing", func(c string) []byte {
			f := newFrame(c, sampleRequest)
			f.Request = bytes.Replace(f.Request, []byte(`,`), []byte(`, `), 1)
			return f.rawBytes()
		}, CodeInvalidAuth, false},
		{"ts changed after signing", func(c string) []byte {
			f := newFrame(c, sampleRequest)
			f.TS++
			return f.bytes()
		}, CodeInvalidAuth, false},
		{"stale ts", func(c string) []byte {
			f := newFrame(c, sampleRequest)
			// Stamped when the frame is built, and by the whole window
			// beyond it: a fixed offset from a time taken at the test's
			// start would shrink as earlier rows ran on a loaded machine.
			f.TS = time.Now().UnixMilli() - 2*MaxSkewMillis
			f.HMAC = RequestMAC(testToken, c, f.Nonce, f.TS, f.Request)
			return f.bytes()
		}, CodeExpired, false},
		{"future ts", func(c string) []byte {
			f := newFrame(c, sampleRequest)
			f.TS = time.Now().UnixMilli() + 2*MaxSkewMillis
			f.HMAC = RequestMAC(testToken, c, f.Nonce, f.TS, f.Request)
			return f.bytes()
		}, CodeExpired, false},
		{"expiresAtMs passed", func(c string) []byte {
			r := sampleRequest
			r.ExpiresAtMs = now.Add(-time.Second).UnixMilli()
			return newFrame(c, r).bytes()
		}, CodeExpired, false},
		{"oversized", func(string) []byte { return bytes.Repeat([]byte("x"), 4097) }, CodeTooLarge, true},
		{"oversized valid json", func(c string) []byte {
			r := sampleRequest
			r.Command = strings.Repeat("a", 5000)
			return newFrame(c, r).bytes()
		}, CodeTooLarge, true},
	}
	ts := startServer(t, func(s *Server) { s.MaxFrame = 4096 })
	decideAll(t, ts.b, func(prompt.Pending) (policy.Approval, string) { return policy.Reject, "approver test" })
	var valid []string
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := dialRaw(t, ts.Path)
			rc.send(tt.line(rc.challenge))
			var ef ErrorFrame
			rc.readInto(&ef)
			if ef.Type != TypeError || ef.Code != tt.code {
				t.Fatalf("got %+v, want error %s", ef, tt.code)
			}
			if tt.closes {
				if line, err := rc.readLine(); !errors.Is(err, io.EOF) {
					t.Fatalf("after %s: got %q, %v; want the connection closed", tt.code, line, err)
				}
				return
			}
			f := newFrame(rc.challenge, sampleRequest)
			valid = append(valid, f.ID)
			rc.send(f.bytes())
			var df DecisionFrame
			rc.readInto(&df)
			if df.Type != TypeDecision || df.ID != f.ID {
				t.Fatalf("follow-up valid request: got %+v", df)
			}
		})
	}
	ts.stop()
	if diff := cmp.Diff(slices.Sorted(slices.Values(valid)), slices.Sorted(slices.Values(ts.added()))); diff != "" {
		t.Errorf("queued ids (-only valid ones +queued):\n%s", diff)
	}
}

func TestReplayedNonce(t *testing.T) {
	ts := startServer(t, nil)
	decideAll(t, ts.b, func(prompt.Pending) (policy.Approval, string) { return policy.AllowOnce, "approver test" })
	rc := dialRaw(t, ts.Path)
	f := newFrame(rc.challenge, sampleRequest)
	rc.send(f.bytes())
	var df DecisionFrame
	rc.readInto(&df)
	if df.Decision != "allow-once" {
		t.Fatalf("first request: %+v", df)
	}
	for _, id := range []string{f.ID, "another-id"} { // same frame, and a re-signed one reusing the nonce
		g := f
		g.ID = id
		rc.send(g.bytes())
		var ef ErrorFrame
		rc.readInto(&ef)
		if ef.Code != CodeReplay {
			t.Fatalf("replay with id %s: got %+v, want %s", id, ef, CodeReplay)
		}
	}
	ts.stop()
	if diff := cmp.Diff([]string{f.ID}, ts.added()); diff != "" {
		t.Errorf("queued (-want +got):\n%s", diff)
	}
}

func TestRateLimit(t *testing.T) {
	// One token an hour after a burst of 3: deterministic, whatever the
	// machine's speed.
	ts := startServer(t, func(s *Server) { s.Rate = rate.Every(time.Hour); s.Burst = 3 })
	decideAll(t, ts.b, func(prompt.Pending) (policy.Approval, string) { return policy.AllowOnce, "approver test" })
	rc := dialRaw(t, ts.Path)
	var codes []string
	for range 10 {
		rc.send(newFrame(rc.challenge, sampleRequest).bytes())
	}
	for range 10 {
		var m map[string]any
		rc.readInto(&m)
		if m["type"] == TypeDecision {
			codes = append(codes, "decision")
		} else {
			codes = append(codes, fmt.Sprint(m["code"]))
		}
	}
	slices.Sort(codes)
	want := []string{"decision", "decision", "decision"}
	for range 7 {
		want = append(want, CodeRateLimited)
	}
	if diff := cmp.Diff(want, codes); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
	// The limit is per peer process, not per connection.
	rc2 := dialRaw(t, ts.Path)
	rc2.send(newFrame(rc2.challenge, sampleRequest).bytes())
	var ef ErrorFrame
	rc2.readInto(&ef)
	if ef.Code != CodeRateLimited {
		t.Errorf("new connection from the same process: got %+v, want %s", ef, CodeRateLimited)
	}
	ts.stop()
	if n := len(ts.added()); n != 3 {
		t.Errorf("%d prompts queued, want 3", n)
	}
}

// TestHalfOpen: a client that connects and says nothing is disconnected
// (no leaked handler); a client that never gets a hello times out.
func TestHalfOpen(t *testing.T) {
	ts := startServer(t, func(s *Server) { s.IdleTimeout = 50 * time.Millisecond })
	rc := dialRaw(t, ts.Path)
	if line, err := rc.readLine(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: got %q, %v; want closed by the server", line, err)
	}
	// A half-sent line is not a way around the idle timeout either.
	rc = dialRaw(t, ts.Path)
	rc.c.Write([]byte(`{"type":"requ`))
	if line, err := rc.readLine(); !errors.Is(err, io.EOF) {
		t.Fatalf("half-sent frame: got %q, %v; want closed by the server", line, err)
	}
	ts.stop()
	if n := ts.Conns(); n != 0 {
		t.Errorf("%d connections still open after stop", n)
	}
}

func TestStaleSocketReplaced(t *testing.T) {
	path := shortDir(t) + "/exec-approvals.sock"
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // leaves a dead socket file, as a crashed approver would
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("stale socket file missing: %v", err)
	}
	ts := startServer(t, func(s *Server) { s.Path = path })
	decideAll(t, ts.b, func(prompt.Pending) (policy.Approval, string) { return policy.AllowOnce, "x" })
	c := &Client{SocketPath: path, Token: testToken}
	if _, _, err := c.Prompt(t.Context(), sampleRequest); err != nil {
		t.Fatalf("Prompt through the replacing server: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("socket mode %#o, want 0600", perm)
	}
}

func TestLiveSocketNotStolen(t *testing.T) {
	ts := startServer(t, nil)
	second := &Server{Path: ts.Path, Token: testToken, Broker: prompt.NewBroker()}
	err := second.Listen()
	if !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("second Listen: %v, want ErrAlreadyRunning", err)
	}
	if want := fmt.Sprintf("an approver is already running (pid %d)", os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
	// The first one still serves.
	decideAll(t, ts.b, func(prompt.Pending) (policy.Approval, string) { return policy.Reject, "x" })
	c := &Client{SocketPath: ts.Path, Token: testToken}
	if a, _, err := c.Prompt(t.Context(), sampleRequest); err != nil || a != policy.Reject {
		t.Fatalf("Prompt after refused takeover: %q, %v", a, err)
	}
}

func TestLiveSocketWithoutLockNotStolen(t *testing.T) {
	// A live listener that holds no lock file (another implementation):
	// the dial probe still protects it.
	path := shortDir(t) + "/exec-approvals.sock"
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	s := &Server{Path: path, Token: testToken, Broker: prompt.NewBroker()}
	if err := s.Listen(); !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("Listen over a live socket: %v, want ErrAlreadyRunning", err)
	}
}

func TestListenRefuses(t *testing.T) {
	open := shortDir(t)
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	notSock := shortDir(t)
	if err := os.WriteFile(notSock+"/exec-approvals.sock", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		token      []byte
		want       string
	}{
		{"empty token", shortDir(t) + "/s.sock", nil, "empty token"},
		{"open directory", open + "/s.sock", testToken, "chmod 700"},
		{"not a socket", notSock + "/exec-approvals.sock", testToken, "not a socket"},
		{"missing directory", shortDir(t) + "/nope/s.sock", testToken, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Server{Path: tt.path, Token: tt.token, Broker: prompt.NewBroker()}
			err := s.Listen()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Listen = %v, want error containing %q", err, tt.want)
			}
		})
	}
}

// TestServerCloseExpiresPrompts: stopping the approver expires what was
// queued and the waiting client gets an answer-less error, not a hang.
func TestServerCloseExpiresPrompts(t *testing.T) {
	ts := startServer(t, nil)
	ch, stop := ts.b.Subscribe()
	defer stop()
	errc := make(chan error, 1)
	go func() {
		c := &Client{SocketPath: ts.Path, Token: testToken}
		_, _, err := c.Prompt(t.Context(), sampleRequest)
		errc <- err
	}()
	for c := range ch {
		if c.Kind == prompt.ChangeAdded {
			break
		}
	}
	ts.stop()
	err := testproc.Recv(t, errc, "Prompt after the approver stopped")
	if !errors.Is(err, prompt.ErrBadReply) && !errors.Is(err, prompt.ErrRefused) {
		t.Fatalf("Prompt after approver stopped: %v, want prompt.ErrBadReply or prompt.ErrRefused", err)
	}
	if n := len(ts.b.List()); n != 0 {
		t.Errorf("%d prompts left queued", n)
	}
}

// TestMaxConns: when every slot holds a connection with a prompt in
// flight, a newcomer is refused (busy connections are never evicted); an
// idle one would have been evicted instead (TestIdlePeersCannotStarveAPrompt).
func TestMaxConns(t *testing.T) {
	ts := startServer(t, func(s *Server) { s.MaxConns = 2 })
	ch, stop := ts.b.Subscribe()
	defer stop()
	for range 2 {
		rc := dialRaw(t, ts.Path)
		rc.send(newFrame(rc.challenge, sampleRequest).bytes())
		for c := range ch {
			if c.Kind == prompt.ChangeAdded {
				break
			}
		}
	}
	c, err := net.Dial("unix", ts.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc := &rawConn{t: t, c: c, r: bufio.NewReader(c)}
	var ef ErrorFrame
	rc.readInto(&ef)
	if ef.Type != TypeError || ef.Code != CodeRateLimited {
		t.Fatalf("third connection got %+v, want error %s", ef, CodeRateLimited)
	}
	if _, err := rc.readLine(); !errors.Is(err, io.EOF) {
		t.Fatalf("third connection not closed: %v", err)
	}
}
