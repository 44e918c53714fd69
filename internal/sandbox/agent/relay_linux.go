package agent

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// startRelay is the egress relay (sandbox.Egress): a run inside the
// sandbox, which has no network of its own, reaches the gateway's egress
// proxy at listen (its own loopback); each connection is copied, unread,
// to a fresh connection to the unix socket dial. The proxy decides and
// records; the relay only carries bytes, so a run reaching the socket
// directly gains nothing.
func startRelay(listen, dial string) (net.Listener, error) {
	if dial == "" {
		return nil, fmt.Errorf("%w: an egress relay without a socket", ErrProtocol)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("egress relay: listen on %s: %w", listen, err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go relayConn(c, dial)
		}
	}()
	return ln, nil
}

// relayConn copies c to and from a fresh connection to the socket at path.
func relayConn(c net.Conn, path string) {
	defer c.Close()
	up, err := net.DialTimeout("unix", path, dialTimeout)
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
