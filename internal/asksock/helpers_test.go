package asksock

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/testproc"
)

var testToken = []byte("test-token-0123456789")

// shortDir returns a fresh 0700 directory with a short path (unix socket
// paths are limited to ~104 bytes, and t.TempDir paths embed the test name).
func shortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "apv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// testServer is a Server serving on a real socket, with every queue change
// recorded until the server stops.
type testServer struct {
	*Server
	b       *prompt.Broker
	mu      sync.Mutex
	changes []prompt.Change
	done    chan struct{}
	cancel  context.CancelFunc
	t       testing.TB
}

// startServer serves a Server (configured by mod) in a fresh directory.
func startServer(t testing.TB, mod func(*Server)) *testServer {
	t.Helper()
	b := prompt.NewBroker()
	s := &Server{Path: filepath.Join(shortDir(t), "exec-approvals.sock"), Token: testToken, Broker: b}
	if mod != nil {
		mod(s)
	}
	if err := s.Listen(); err != nil {
		t.Fatalf("Listen: %v", err)
	}
	ts := &testServer{Server: s, b: b, done: make(chan struct{}), t: t}
	ch, stop := b.Subscribe()
	recDone := make(chan struct{})
	go func() {
		defer close(recDone)
		for c := range ch {
			ts.mu.Lock()
			ts.changes = append(ts.changes, c)
			ts.mu.Unlock()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	ts.cancel = cancel
	go func() {
		defer close(ts.done)
		if err := s.Serve(ctx); err != nil {
			t.Errorf("Serve: %v", err)
		}
		stop()
		<-recDone
	}()
	t.Cleanup(ts.stop)
	return ts
}

// stop shuts the server down and waits until every connection handler and
// prompt has finished, so recorded changes are final.
func (ts *testServer) stop() {
	ts.cancel()
	testproc.Recv(ts.t, ts.done, "the test server's shutdown")
}

// added returns the ids of every prompt that reached the queue.
func (ts *testServer) added() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var ids []string
	for _, c := range ts.changes {
		if c.Kind == prompt.ChangeAdded {
			ids = append(ids, c.Pending.ID)
		}
	}
	return ids
}

// decideAll answers every prompt of b with a until the test ends.
func decideAll(t testing.TB, b *prompt.Broker, fn func(prompt.Pending) (policy.Approval, string)) {
	t.Helper()
	ch, stop := b.Subscribe()
	t.Cleanup(stop)
	go func() {
		for c := range ch {
			if c.Kind != prompt.ChangeAdded {
				continue
			}
			a, by := fn(c.Pending)
			b.Resolve(c.Pending.ID, a, by)
		}
	}()
}

// rawConn is a hand-driven protocol client for abuse tests.
type rawConn struct {
	t         testing.TB
	c         net.Conn
	r         *bufio.Reader
	challenge string
}

// dialRaw connects and reads the hello frame.
func dialRaw(t testing.TB, path string) *rawConn {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	rc := &rawConn{t: t, c: c, r: bufio.NewReader(c)}
	var h Hello
	rc.readInto(&h)
	if h.Type != TypeHello || h.V != 1 || !isHex16(h.Challenge) {
		t.Fatalf("bad hello: %+v", h)
	}
	rc.challenge = h.Challenge
	return rc
}

func (rc *rawConn) send(line []byte) {
	rc.t.Helper()
	if _, err := rc.c.Write(append(line, '\n')); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

// readLine returns the next frame, or an error (io.EOF when the server
// closed). The deadline only guards against a hung test.
func (rc *rawConn) readLine() ([]byte, error) {
	rc.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	return readLine(rc.r, 1<<20)
}

func (rc *rawConn) readInto(v any) {
	rc.t.Helper()
	line, err := rc.readLine()
	if err != nil {
		rc.t.Fatalf("read frame: %v", err)
	}
	if err := json.Unmarshal(line, v); err != nil {
		rc.t.Fatalf("decode %q: %v", line, err)
	}
}

// frame is a request frame under construction; sign computes its hmac
// from its fields (after the test has tampered with them as it wishes).
type frame struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	TS      int64           `json:"ts"`
	Nonce   string          `json:"nonce"`
	Request json.RawMessage `json:"request"`
	HMAC    string          `json:"hmac,omitempty"`
}

func newFrame(challenge string, req prompt.Request) frame {
	raw, _ := json.Marshal(req)
	f := frame{Type: TypeRequest, ID: randomHex(8), TS: time.Now().UnixMilli(), Nonce: randomHex(16), Request: raw}
	f.HMAC = RequestMAC(testToken, challenge, f.Nonce, f.TS, f.Request)
	return f
}

func (f frame) bytes() []byte {
	b, _ := json.Marshal(f)
	return b
}

var sampleRequest = prompt.Request{
	Command: "ls -la", Argv: []string{"ls", "-la"}, Cwd: "/tmp", Host: "gateway",
	Security: "allowlist", Ask: "on-miss", AgentID: "main", SessionKey: "s1",
	ResolvedPaths: []string{"/usr/bin/ls"}, Allowlisted: []bool{false}, Reason: "allowlist-miss",
}

// rawBytes encodes f keeping the request's bytes exactly as they are
// (json.Marshal would compact a RawMessage).
func (f frame) rawBytes() []byte {
	return fmt.Appendf(nil, `{"type":%q,"id":%q,"ts":%d,"nonce":%q,"request":%s,"hmac":%q}`, f.Type, f.ID, f.TS, f.Nonce, f.Request, f.HMAC)
}
