package asksock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
)

// fakeApprover serves one scripted reply per connection on a real socket:
// reply gets the hello's challenge and the client's request frame and
// returns the lines to send back (nil: say nothing and hold the
// connection).
func fakeApprover(t *testing.T, hello bool, reply func(challenge string, req RequestFrame) []string) string {
	t.Helper()
	path := shortDir(t) + "/fake.sock"
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			go func() {
				if !hello {
					return // hold the connection open, say nothing
				}
				challenge := randomHex(16)
				b, _ := json.Marshal(Hello{Type: TypeHello, V: 1, Challenge: challenge})
				c.Write(append(b, '\n'))
				line, err := readLine(bufio.NewReader(c), MaxFrame)
				if err != nil {
					return
				}
				var f RequestFrame
				json.Unmarshal(line, &f)
				lines := reply(challenge, f)
				if lines == nil {
					return
				}
				for _, l := range lines {
					c.Write([]byte(l + "\n"))
				}
				c.Close()
			}()
		}
	}()
	return path
}

func decisionLine(id, decision, mac string) string {
	b, _ := json.Marshal(DecisionFrame{Type: TypeDecision, ID: id, Decision: decision, HMAC: mac})
	return string(b)
}

// TestClientExpiredAtItsDeadline: an approver that finds the prompt past
// its expiresAtMs answers "expired" at once. When that answer is read at
// the prompt's own deadline (a request slow to arrive on a loaded
// machine), the prompt timed out, and the fallback says so; read well
// before it (an approver whose clock runs ahead), it stays a refusal.
func TestClientExpiredAtItsDeadline(t *testing.T) {
	path := fakeApprover(t, true, func(_ string, f RequestFrame) []string {
		b, _ := json.Marshal(ErrorFrame{Type: TypeError, ID: f.ID, Code: CodeExpired, Message: "the prompt's expiresAtMs has passed"})
		return []string{string(b)}
	})
	for _, tt := range []struct {
		name  string
		ahead time.Duration // of the client's clock; its deadline is a minute away
		want  error
	}{
		{"read at the deadline", time.Minute, prompt.ErrTimeout},
		{"read within the millisecond before it", time.Minute - expiresAtUnit/2, prompt.ErrTimeout},
		{"read well before it", 0, prompt.ErrRefused},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &Client{SocketPath: path, Token: testToken, Timeout: time.Minute}
			c.now = func() time.Time { return time.Now().Add(tt.ahead) }
			_, _, err := c.Prompt(t.Context(), sampleRequest)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), "expiresAtMs has passed") {
				t.Fatalf("Prompt: %v; want %v with the approver's reason", err, tt.want)
			}
		})
	}
}

func TestClientRejectsUnverifiableReplies(t *testing.T) {
	tests := []struct {
		name  string
		reply func(ch string, f RequestFrame) []string
		want  error
		msg   string
	}{
		{"tampered decision hmac", func(ch string, f RequestFrame) []string {
			mac := DecisionMAC(testToken, ch, f.ID, "deny") // signed deny, sent as allow
			return []string{decisionLine(f.ID, "allow-once", mac)}
		}, prompt.ErrBadReply, "hmac"},
		{"hmac from another token", func(ch string, f RequestFrame) []string {
			return []string{decisionLine(f.ID, "allow-once", DecisionMAC([]byte("nope"), ch, f.ID, "allow-once"))}
		}, prompt.ErrBadReply, "hmac"},
		{"hmac for another challenge", func(_ string, f RequestFrame) []string {
			return []string{decisionLine(f.ID, "allow-once", DecisionMAC(testToken, randomHex(16), f.ID, "allow-once"))}
		}, prompt.ErrBadReply, "hmac"},
		{"missing hmac", func(_ string, f RequestFrame) []string {
			return []string{decisionLine(f.ID, "allow-once", "")}
		}, prompt.ErrBadReply, "hmac"},
		{"decision for another id", func(ch string, f RequestFrame) []string {
			return []string{decisionLine("other", "allow-once", DecisionMAC(testToken, ch, "other", "allow-once"))}
		}, prompt.ErrBadReply, "another request"},
		{"unknown decision", func(ch string, f RequestFrame) []string {
			return []string{decisionLine(f.ID, "allow-forever", DecisionMAC(testToken, ch, f.ID, "allow-forever"))}
		}, prompt.ErrBadReply, "unknown decision"},
		{"closed without decision", func(string, RequestFrame) []string { return []string{} }, prompt.ErrBadReply, "closed"},
		{"garbage", func(string, RequestFrame) []string { return []string{"}{"} }, prompt.ErrBadReply, "unexpected"},
		{"error frame", func(_ string, f RequestFrame) []string {
			return []string{`{"type":"error","id":"` + f.ID + `","code":"invalid-auth","message":"hmac mismatch"}`}
		}, prompt.ErrRefused, "invalid-auth"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := fakeApprover(t, true, tt.reply)
			c := &Client{SocketPath: path, Token: testToken, Timeout: time.Minute}
			a, _, err := c.Prompt(t.Context(), sampleRequest)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Prompt = %q, %v; want %v mentioning %q", a, err, tt.want, tt.msg)
			}
			if a != "" {
				t.Errorf("answer %q returned with an error", a)
			}
		})
	}
}

func TestClientSignsItsRequest(t *testing.T) {
	var got RequestFrame
	var challenge string
	path := fakeApprover(t, true, func(ch string, f RequestFrame) []string {
		got, challenge = f, ch
		return []string{decisionLine(f.ID, "deny", DecisionMAC(testToken, ch, f.ID, "deny"))}
	})
	c := &Client{SocketPath: path, Token: testToken}
	a, by, err := c.Prompt(t.Context(), sampleRequest)
	if err != nil || a != policy.Reject || by != "approver" {
		t.Fatalf("Prompt = %q by %q, %v", a, by, err)
	}
	if want := RequestMAC(testToken, challenge, got.Nonce, got.TS, got.Request); got.HMAC != want {
		t.Errorf("request hmac %s, want %s", got.HMAC, want)
	}
	if !isHex16(got.Nonce) || got.Type != TypeRequest {
		t.Errorf("frame %+v", got)
	}
	var req prompt.Request
	if err := json.Unmarshal(got.Request, &req); err != nil || req.ExpiresAtMs == 0 {
		t.Errorf("request %s: expiresAtMs not set (%v)", got.Request, err)
	}
}

func TestClientNotOfferedAllowAlways(t *testing.T) {
	path := fakeApprover(t, true, func(ch string, f RequestFrame) []string {
		return []string{decisionLine(f.ID, "allow-always", DecisionMAC(testToken, ch, f.ID, "allow-always"))}
	})
	req := sampleRequest
	req.Choices = []string{"allow-once", "deny"}
	c := &Client{SocketPath: path, Token: testToken}
	if _, _, err := c.Prompt(t.Context(), req); !errors.Is(err, prompt.ErrBadReply) {
		t.Fatalf("allow-always when not offered: %v, want prompt.ErrBadReply", err)
	}
}

func TestClientUnreachable(t *testing.T) {
	tests := []struct{ name, path string }{
		{"no socket file", shortDir(t) + "/exec-approvals.sock"},
		{"stale socket file", func() string {
			p := shortDir(t) + "/exec-approvals.sock"
			ln, err := net.Listen("unix", p)
			if err != nil {
				t.Fatal(err)
			}
			ln.(*net.UnixListener).SetUnlinkOnClose(false)
			ln.Close()
			return p
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Client{SocketPath: tt.path, Token: testToken, Timeout: time.Hour}
			_, _, err := c.Prompt(t.Context(), sampleRequest)
			if !errors.Is(err, prompt.ErrUnreachable) || !strings.Contains(err.Error(), "hint") {
				t.Fatalf("Prompt = %v, want prompt.ErrUnreachable with a hint", err)
			}
		})
	}
	c := &Client{SocketPath: "/nonexistent/s.sock"}
	if _, _, err := c.Prompt(t.Context(), sampleRequest); !errors.Is(err, prompt.ErrUnreachable) {
		t.Fatalf("no token: %v, want prompt.ErrUnreachable", err)
	}
}

func TestClientTimeout(t *testing.T) {
	t.Run("no hello", func(t *testing.T) {
		path := fakeApprover(t, false, nil)
		c := &Client{SocketPath: path, Token: testToken, Timeout: 50 * time.Millisecond}
		if _, _, err := c.Prompt(t.Context(), sampleRequest); !errors.Is(err, prompt.ErrTimeout) {
			t.Fatalf("Prompt = %v, want prompt.ErrTimeout", err)
		}
	})
	t.Run("no decision", func(t *testing.T) {
		ts := startServer(t, nil)
		c := &Client{SocketPath: ts.Path, Token: testToken, Timeout: 50 * time.Millisecond}
		_, _, err := c.Prompt(t.Context(), sampleRequest)
		if !errors.Is(err, prompt.ErrTimeout) || !strings.Contains(err.Error(), "no decision within 50ms") {
			t.Fatalf("Prompt = %v, want prompt.ErrTimeout", err)
		}
	})
	// Whether a 50 ms timeout fires before or after the prompt reaches the
	// approver depends on load; this client gives up only once it has.
	t.Run("the approver drops a prompt whose client gave up", func(t *testing.T) {
		ts := startServer(t, nil)
		c := &Client{SocketPath: ts.Path, Token: testToken, Timeout: time.Hour}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() {
			for deadline := time.Now().Add(time.Minute); len(ts.added()) == 0 && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
		}()
		_, _, err := c.Prompt(ctx, sampleRequest)
		if !errors.Is(err, prompt.ErrTimeout) || !strings.Contains(err.Error(), "prompt canceled") {
			t.Fatalf("Prompt = %v, want prompt.ErrTimeout (canceled)", err)
		}
		ts.stop()
		ts.mu.Lock()
		defer ts.mu.Unlock()
		var kinds []string
		for _, c := range ts.changes {
			kinds = append(kinds, c.Kind)
		}
		if strings.Join(kinds, ",") != "added,expired" {
			t.Errorf("queue changes %v, want added,expired", kinds)
		}
	})
}

func TestClientHonoursExpiresAt(t *testing.T) {
	ts := startServer(t, nil)
	c := &Client{SocketPath: ts.Path, Token: testToken, Timeout: time.Hour}
	req := sampleRequest
	req.ExpiresAtMs = time.Now().Add(50 * time.Millisecond).UnixMilli()
	if _, _, err := c.Prompt(t.Context(), req); !errors.Is(err, prompt.ErrTimeout) {
		t.Fatalf("Prompt = %v, want prompt.ErrTimeout at the request's expiry", err)
	}
}
