package testproc

import (
	"net"
	"sync"
	"testing"
)

// SilentListener accepts TCP connections on loopback and never answers:
// what a hung gateway (or another program on its port) looks like to a
// client. It returns the ws:// URL; everything closes at the test's end.
func SilentListener(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never read or written
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "ws://" + ln.Addr().String()
}
