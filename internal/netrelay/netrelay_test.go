package netrelay

import (
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// TestServeCarriesBothWays: bytes reach the socket unread, the client's
// half close reaches the server (which answers only after its end of
// stream), and the answer comes back.
func TestServeCarriesBothWays(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	up, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() {
		c, err := up.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(c) // returns at the relayed half close
		_, _ = c.Write(append([]byte("got:"), b...))
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go Serve(ln, sock)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("CONNECT x:443")); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "got:CONNECT x:443" {
		t.Fatalf("relayed answer %q, %v", got, err)
	}
}
