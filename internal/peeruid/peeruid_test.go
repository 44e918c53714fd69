package peeruid

import (
	"net"
	"os"
	"runtime"
	"testing"
)

// TestOfConn: over IPv4 and IPv6 loopback, the owner of the other end of
// a real connection is this process's user, from both ends. Control: a
// connection that does not exist (another port) matches no socket.
func TestOfConn(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/net/tcp")
	}
	for _, network := range []string{"tcp4", "tcp6"} {
		t.Run(network, func(t *testing.T) {
			addr := map[string]string{"tcp4": "127.0.0.1:0", "tcp6": "[::1]:0"}[network]
			ln, err := net.Listen(network, addr)
			if err != nil {
				t.Skipf("no %s loopback: %v", network, err)
			}
			defer ln.Close()
			accepted := make(chan net.Conn, 1)
			go func() {
				c, err := ln.Accept()
				if err == nil {
					accepted <- c
				}
				close(accepted)
			}()
			c, err := net.Dial(network, ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			s := <-accepted
			if s == nil {
				t.Fatal("accept failed")
			}
			defer s.Close()
			for name, conn := range map[string]net.Conn{"client side": c, "server side": s} {
				uid, err := OfConn(conn)
				if err != nil || uid != uint32(os.Getuid()) {
					t.Errorf("%s: uid %d, %v; want %d", name, uid, err, os.Getuid())
				}
			}
			if _, err := OfConn(elsewhere{c}); err == nil {
				t.Error("control: a connection that does not exist matched a socket")
			}
		})
	}
}

// elsewhere reports a connection's peer on another port, where no
// socket of this connection is.
type elsewhere struct{ net.Conn }

func (e elsewhere) RemoteAddr() net.Addr {
	a := e.Conn.RemoteAddr().(*net.TCPAddr)
	return &net.TCPAddr{IP: a.IP, Port: 1}
}
