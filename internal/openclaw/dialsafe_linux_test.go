package openclaw

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/bridge"
)

// squatter runs a listener on a loopback port as uid 65534 (another local
// user) that prints what it reads; it returns the URL and the output.
func squatter(t *testing.T) (url string, out *syncBuf) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to run a listener as another user")
	}
	// A system python3: another user cannot run one under /root.
	py := ""
	for _, p := range []string{"/usr/bin/python3", "/bin/python3"} {
		if _, err := os.Stat(p); err == nil {
			py = p
			break
		}
	}
	if py == "" {
		t.Skip("needs a system python3 for the other user's listener")
	}
	// Find a free port, then let the other user bind it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	script := `import socket,sys
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1",` + port + `)); s.listen(8)
print("listening", flush=True)
while True:
    c,_=s.accept(); c.settimeout(2)
    try: sys.stdout.write(c.recv(65536).decode("latin-1")); sys.stdout.flush()
    except Exception: pass
    c.close()`
	out = &syncBuf{}
	cmd := exec.Command(py, "-c", script)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	pr, pw, _ := os.Pipe()
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		first := true
		for {
			n, err := pr.Read(buf)
			if n > 0 {
				out.Write(buf[:n])
				if first {
					first = false
					close(ready)
				}
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("the other user's listener did not start")
	}
	return "ws://" + addr, out
}

// TestTokenNotSentToAnotherUsersSocket is issue 40's OpenClaw door: with
// OpenClaw's port squatted by another local user, the node refuses to
// connect, naming the owner, and the squatter reads nothing. Control:
// with the owner check off, the same dial reaches the squatter (its
// upgrade request arrives; the token would follow its challenge).
func TestTokenNotSentToAnotherUsersSocket(t *testing.T) {
	url, out := squatter(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	p := dialParams{URL: url, Token: "oc-secret-token", Version: "test"}
	_, _, err := dial(ctx, p, bridge.Options{})
	if err == nil || !strings.Contains(err.Error(), "uid 65534") {
		t.Fatalf("dial to another user's socket = %v, want refused naming uid 65534", err)
	}
	time.Sleep(200 * time.Millisecond) // what the squatter read, if anything, is printed by now
	if strings.Contains(out.String(), "GET") {
		t.Fatalf("the squatter read a request: %q", out.String())
	}
	p.anyOwner = true
	_, _, _ = dial(ctx, p, bridge.Options{})
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "GET") {
		if time.Now().After(deadline) {
			t.Fatalf("control: with the check off nothing reached the squatter (%q): the test shows nothing", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPlainWebSocketOffLoopbackRefused: a ws:// URL off loopback is
// refused before any connection unless $EXECHOST_INSECURE_PLAINTEXT=1.
// Control: with the opt-in the dial goes ahead (and fails to connect to
// the unroutable test address, not on the URL).
func TestPlainWebSocketOffLoopbackRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	p := dialParams{URL: "ws://192.0.2.1:18789", Token: "oc-secret-token", Version: "test"}
	_, _, err := dial(ctx, p, bridge.Options{})
	if err == nil || !strings.Contains(err.Error(), "refusing plain ws://") {
		t.Fatalf("ws:// off loopback = %v, want refused", err)
	}
	t.Setenv("EXECHOST_INSECURE_PLAINTEXT", "1")
	_, _, err = dial(ctx, p, bridge.Options{})
	if err == nil || strings.Contains(err.Error(), "refusing plain ws://") {
		t.Fatalf("control: with the opt-in = %v, want a connection attempt", err)
	}
}

// syncBuf is a buffer one goroutine writes while the test reads it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
