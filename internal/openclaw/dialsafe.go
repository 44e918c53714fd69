package openclaw

import (
	"context"
	"fmt"
	"net"
	"net/http"
	neturl "net/url"
	"os"

	"github.com/exechost/exechost/internal/client"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/peeruid"
)

// OpenClaw's protocol makes the node send OpenClaw's gateway token
// itself in its connect request (connect.params.auth.token): it is not a
// proof bound to the challenge, so whoever answers the connection reads
// the token. Before it goes, the node checks where it goes:
//
//   - plain ws:// off loopback is refused unless
//     $EXECHOST_INSECURE_PLAINTEXT=1 (as for the exechost node): the token
//     would cross the network in clear;
//   - on loopback, the listening socket must belong to this user or root
//     (peeruid reads the kernel's socket table): another local user
//     squatting OpenClaw's port while it is down gets a refused connection,
//     not the token.
//
// Off loopback over wss://, TLS's certificate verification is what
// authenticates the gateway.

// tokenSafeTransport checks p's URL and returns the transport the dial
// uses: one whose connections to loopback are checked for their owner
// when a token will be sent.
func tokenSafeTransport(p dialParams) (*http.Transport, error) {
	if err := client.CheckPlaintext(p.URL); err != nil {
		return nil, fmt.Errorf("openclaw: %w", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if p.Token == "" || p.anyOwner {
		return tr, nil
	}
	u, err := neturl.Parse(p.URL)
	if err != nil {
		return nil, fmt.Errorf("openclaw gateway URL %q: %w", p.URL, err)
	}
	if !loopbackHost(u.Hostname()) {
		return tr, nil
	}
	d := &net.Dialer{}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if err := checkOwner(c); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
	return tr, nil
}

// checkOwner refuses a loopback connection whose other end belongs to
// neither this user nor root; one whose owner cannot be found is refused
// too (fail closed: the token is the thing at stake).
func checkOwner(c net.Conn) error {
	uid, err := peeruid.OfConn(c)
	if err != nil {
		return hint.Wrap(fmt.Errorf("refusing to send OpenClaw's token to %s: cannot tell which user listens there: %w", c.RemoteAddr(), err), "run the OpenClaw gateway on this machine's loopback, or reach it over wss://")
	}
	if me := uint32(os.Getuid()); uid != me && uid != 0 {
		return hint.Wrap(fmt.Errorf("refusing to send OpenClaw's token to %s: the socket listening there belongs to uid %d, not this user (%d) or root", c.RemoteAddr(), uid, me), "another user may be squatting OpenClaw's port while it is down: start `openclaw gateway` and check `ss -ltnp`")
	}
	return nil
}

// loopbackHost reports whether host is localhost or a loopback address.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
