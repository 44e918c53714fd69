package agent

import (
	"fmt"
	"net"

	"github.com/exechost/exechost/internal/netrelay"
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
	go netrelay.Serve(ln, dial)
	return ln, nil
}
