package egress

import (
	"net"
	"path/filepath"
	"testing"
	"time"
)

// TestServeForgetsClosedListeners: a shared listener its owner closes (a
// sandbox's socket, removed with the sandbox) ends its server, and the
// proxy keeps no server for it, while another listener still serves.
func TestServeForgetsClosedListeners(t *testing.T) {
	p := New()
	defer p.Close()
	servers := func() int { p.mu.Lock(); defer p.mu.Unlock(); return len(p.servers) }
	listen := func(name string) (net.Listener, chan error) {
		ln, err := net.Listen("unix", filepath.Join(t.TempDir(), name))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- p.Serve(ln) }()
		return ln, done
	}
	a, aDone := listen("a.sock")
	b, _ := listen("b.sock")
	waitFor := func(want int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for servers() != want {
			if time.Now().After(deadline) {
				t.Fatalf("servers = %d, want %d", servers(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor(2)
	a.Close()
	select {
	case <-aDone:
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its listener closed")
	}
	waitFor(1)
	c, err := net.Dial("unix", b.Addr().String())
	if err != nil {
		t.Fatalf("the other listener: %v", err)
	}
	c.Close()
}
