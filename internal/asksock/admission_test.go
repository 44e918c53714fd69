package asksock

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
)

// manualTimers replaces the server's hello timer: nothing fires until the
// test calls fire, so no test races a real clock.
type manualTimers struct {
	mu     sync.Mutex
	timers []*manualTimer
	armed  chan struct{}
}

type manualTimer struct {
	f       func()
	stopped bool
}

func newManualTimers() *manualTimers { return &manualTimers{armed: make(chan struct{}, 1024)} }

func (m *manualTimers) afterFunc(_ time.Duration, f func()) func() bool {
	t := &manualTimer{f: f}
	m.mu.Lock()
	m.timers = append(m.timers, t)
	m.mu.Unlock()
	m.armed <- struct{}{}
	return func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// fire runs every armed timer that was not stopped, as time.AfterFunc
// would once its duration passed, and reports how many ran.
func (m *manualTimers) fire() int {
	m.mu.Lock()
	var run []func()
	for _, t := range m.timers {
		if !t.stopped {
			t.stopped = true
			run = append(run, t.f)
		}
	}
	m.mu.Unlock()
	for _, f := range run {
		f()
	}
	return len(run)
}

func (m *manualTimers) waitArmed(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for range n {
		select {
		case <-m.armed:
		case <-deadline:
			t.Fatalf("hello timer was never armed")
		}
	}
}

// TestHelloTimeoutClosesSilentConnection: a peer that gets hello and sends
// nothing (or only frames that fail authentication) is closed when the
// hello timer fires; a peer whose request was accepted is not.
func TestHelloTimeoutClosesSilentConnection(t *testing.T) {
	mt := newManualTimers()
	ts := startServer(t, func(s *Server) { s.afterFunc = mt.afterFunc })

	silent := dialRaw(t, ts.Path)
	forged := dialRaw(t, ts.Path)
	good := dialRaw(t, ts.Path)
	mt.waitArmed(t, 3)

	f := newFrame(forged.challenge, sampleRequest)
	f.HMAC = strings.Repeat("0", 64)
	forged.send(f.bytes())
	var ef ErrorFrame
	forged.readInto(&ef)
	if ef.Code != CodeInvalidAuth {
		t.Fatalf("forged frame: got %+v", ef)
	}

	ch, stop := ts.b.Subscribe()
	defer stop()
	gf := newFrame(good.challenge, sampleRequest)
	good.send(gf.bytes())
	for c := range ch {
		if c.Kind == prompt.ChangeAdded && c.Pending.ID == gf.ID {
			break
		}
	}

	if n := mt.fire(); n != 2 {
		t.Fatalf("fired %d hello timers, want 2 (silent and forged; the good one was disarmed)", n)
	}
	for name, rc := range map[string]*rawConn{"silent": silent, "forged": forged} {
		if line, err := rc.readLine(); !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
			t.Errorf("%s connection still open after the hello timeout: %q %v", name, line, err)
		}
	}
	if err := ts.b.Resolve(gf.ID, policy.AllowOnce, "test"); err != nil {
		t.Fatalf("resolve the good prompt: %v", err)
	}
	var df DecisionFrame
	good.readInto(&df)
	if df.Type != TypeDecision || df.Decision != string(policy.AllowOnce) {
		t.Fatalf("good connection got %+v, want its decision", df)
	}
}

const helperPromptEnv = "APPROVER_TEST_HELPER_PROMPT"

// TestHelperPrompt is not a test: TestIdlePeersCannotStarveAPrompt runs
// the test binary again as a separate process (its own pid) to send one
// real, signed prompt.
func TestHelperPrompt(t *testing.T) {
	path := os.Getenv(helperPromptEnv)
	if path == "" {
		t.Skip("helper process only")
	}
	cl := &Client{SocketPath: path, Token: testToken, Timeout: time.Minute}
	a, by, err := cl.Prompt(t.Context(), sampleRequest)
	fmt.Printf("PROMPT %s by=%s err=%v\n", a, by, err)
}

// TestIdlePeersCannotStarveAPrompt: one process opens more idle, same-uid
// connections than the server has slots; a real prompt from another
// process still reaches the human and gets its decision. Both admission
// rules are exercised: the per-process cap (default) and, with the cap
// lifted, eviction of an idle connection when the table is full.
func TestIdlePeersCannotStarveAPrompt(t *testing.T) {
	for _, tt := range []struct {
		name    string
		perPeer int
	}{
		{"per-process cap", 0},
		{"eviction of idle connections", 1000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mt := newManualTimers() // never fired: idle peers stay for good
			ts := startServer(t, func(s *Server) {
				s.afterFunc = mt.afterFunc
				s.MaxConnsPerPeer = tt.perPeer
			})
			const idle = DefaultMaxConns + 16
			opened := 0
			for range idle {
				c, err := net.Dial("unix", ts.Path)
				if err != nil {
					t.Fatalf("dial: %v", err)
				}
				t.Cleanup(func() { c.Close() })
				c.SetReadDeadline(time.Now().Add(20 * time.Second))
				buf := make([]byte, 256)
				if n, err := c.Read(buf); err == nil && strings.Contains(string(buf[:n]), `"hello"`) {
					opened++
				}
			}
			if opened < DefaultMaxConnsPerPeer {
				t.Fatalf("only %d idle connections got a hello", opened)
			}
			if n := ts.Conns(); n > DefaultMaxConns {
				t.Fatalf("%d connections open, over the limit %d", n, DefaultMaxConns)
			}
			decideAll(t, ts.b, func(prompt.Pending) (policy.Approval, string) { return policy.AllowOnce, "test" })

			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperPrompt$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), helperPromptEnv+"="+ts.Path)
			cmd.WaitDelay = 10 * time.Second
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("helper: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "PROMPT allow-once by=test err=<nil>") {
				t.Fatalf("the other process's prompt did not get through:\n%s", out)
			}
		})
	}
}
