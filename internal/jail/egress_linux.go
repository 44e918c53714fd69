package jail

import (
	"fmt"
	"net"
	"strconv"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/netrelay"
	"golang.org/x/sys/unix"
)

// startEgressRelay gives a jail with network none its one way out: a TCP
// listener on the jail's own loopback (o.Egress.Addr) whose every
// connection is relayed, unread, to the host's egress proxy on the unix
// socket o.Egress.Socket. The socket is opened (O_PATH) before the view
// is built and reached through /proc/self/fd, so the view need not show
// it and no run holds it (close-on-exec; the server is not dumpable).
// The relay runs on the server's other threads, which carry none of the
// forking thread's Landlock or seccomp rules: it only accepts and copies.
func startEgressRelay(o *Options) error {
	e := o.Egress
	sock, err := unix.Open(e.Socket, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("egress relay: proxy socket: %w", err)
	}
	ln, err := net.Listen("tcp", e.Addr)
	if err != nil {
		unix.Close(sock)
		return fmt.Errorf("egress relay: listen on %s: %w", e.Addr, err)
	}
	go netrelay.Serve(ln, "/proc/self/fd/"+strconv.Itoa(sock))
	return nil
}

// egressLandlock lets a run of an egress jail connect over TCP at all:
// Landlock's network none refuses every TCP connect, the relay's too.
// The jail's network namespace (built before Landlock, or the jail fails)
// is then what bounds TCP: its own loopback, whose one way out is the
// relay. Without the network layer Landlock keeps refusing TCP.
func egressLandlock(o *Options, c *confine.Confinement) {
	if o.Egress != nil && o.has(confine.LayerNetwork) && c.Network == confine.NetworkNone {
		c.Network = confine.NetworkAll
	}
}
