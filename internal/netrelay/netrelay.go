// Package netrelay carries TCP connections to a unix socket, unread: the
// one way out a network-none jail (internal/jail) or sandbox
// (internal/sandbox/agent) has to the egress proxy, which decides and
// records. A run that reaches the socket directly gains nothing. A leaf
// (standard library only), so the jail server, an early re-exec entry,
// pays no package init for it.
package netrelay

import (
	"io"
	"net"
	"sync"
	"time"
)

// DialTimeout bounds the dial of the socket for each connection.
const DialTimeout = 5 * time.Second

// Serve relays each connection ln accepts to a fresh connection to the
// unix socket at path, until ln is closed.
func Serve(ln net.Listener, path string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go relay(c, path)
	}
}

// relay copies c to and from a fresh connection to the socket at path,
// passing each side's end of stream on as a half close.
func relay(c net.Conn, path string) {
	defer c.Close()
	up, err := net.DialTimeout("unix", path, DialTimeout)
	if err != nil {
		return
	}
	defer up.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(up, c)
		_ = up.(*net.UnixConn).CloseWrite()
	}()
	_, _ = io.Copy(c, up)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	wg.Wait()
}
