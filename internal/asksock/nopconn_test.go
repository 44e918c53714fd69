package asksock

import (
	"net"
	"time"
)

// nopConn is a net.Conn that accepts deadline calls, for exercising the
// frame parser without a socket.
type nopConn struct{ net.Conn }

func (nopConn) SetReadDeadline(time.Time) error  { return nil }
func (nopConn) SetWriteDeadline(time.Time) error { return nil }
func (nopConn) SetDeadline(time.Time) error      { return nil }
