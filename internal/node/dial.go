package node

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/coder/websocket"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/hint"
)

// errPin is wrapped when a wss:// gateway presents a certificate other
// than the pinned one: reconnecting would not help, and continuing would
// hand commands to whoever holds that certificate.
var errPin = errors.New("gateway certificate does not match the pinned fingerprint")

// normalizeFingerprint accepts hex with or without colons and a "sha256:"
// prefix.
func normalizeFingerprint(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.TrimPrefix(s, "sha256:")
	return strings.ReplaceAll(s, ":", "")
}

// dial opens the WebSocket. For wss:// it checks the certificate against
// node.json's pin; without a pin it trusts the first certificate it sees
// (the gateway's log and `gateway join-key` print the fingerprint to
// compare) and pins it.
func (c *Client) dial(ctx context.Context, id Identity) (*websocket.Conn, error) {
	// A node's results are its large frames: each goes to the socket in
	// one write (bridge.BatchingClient, over the pinning TLS transport
	// for wss://).
	opts := &websocket.DialOptions{}
	if strings.HasPrefix(id.Gateway.URL, "wss://") {
		pin := id.Gateway.TLSFingerprint
		var seen string
		// mismatch records the pin check's verdict: the TLS stack does not
		// keep errPin in the chain it returns, and its text is not parsed.
		var mismatch atomic.Bool
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{
			MinVersion: tls.VersionTLS12,
			// Verification happens in VerifyConnection against the pin,
			// which is what a self-signed gateway certificate needs.
			InsecureSkipVerify: true,
			VerifyConnection: func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 {
					return errors.New("gateway sent no certificate")
				}
				sum := sha256.Sum256(cs.PeerCertificates[0].Raw)
				seen = hex.EncodeToString(sum[:])
				if pin != "" && seen != pin {
					mismatch.Store(true)
					return hint.Wrap(fmt.Errorf("%w: got %s, pinned %s", errPin, seen, pin), "if the gateway's certificate was replaced on purpose, update gateway.tlsFingerprint in node.json")
				}
				return nil
			},
		}
		opts.HTTPClient = bridge.BatchingClient(tr)
		ws, resp, err := websocket.Dial(ctx, id.Gateway.URL, opts)
		if err != nil {
			if errors.Is(err, errPin) || mismatch.Load() {
				return nil, fmt.Errorf("dial %s: %w", id.Gateway.URL, errPin)
			}
			if e := bridge.BusyRefusal(id.Gateway.URL, resp); e != nil {
				return nil, e
			}
			if why := bridge.UpgradeRefusal(resp); why != "" {
				return nil, fmt.Errorf("dial %s: the gateway refused the connection: %s", id.Gateway.URL, why)
			}
			return nil, fmt.Errorf("dial %s: %w", id.Gateway.URL, err)
		}
		if pin == "" && seen != "" {
			c.mu.Lock()
			c.id.Gateway.TLSFingerprint = seen
			err := c.id.Save(c.opts.StateDir)
			c.mu.Unlock()
			if err != nil {
				ws.CloseNow()
				return nil, err
			}
			c.log.Warn("pinned the gateway's certificate on first use; compare it with the gateway's log", "tlsFingerprint", seen)
		}
		return ws, nil
	}
	opts.HTTPClient = bridge.BatchingClient(nil)
	ws, resp, err := websocket.Dial(ctx, id.Gateway.URL, opts)
	if err != nil {
		if e := bridge.BusyRefusal(id.Gateway.URL, resp); e != nil {
			return nil, e
		}
		if why := bridge.UpgradeRefusal(resp); why != "" {
			return nil, fmt.Errorf("dial %s: the gateway refused the connection: %s", id.Gateway.URL, why)
		}
		return nil, hint.Wrap(fmt.Errorf("dial %s: %w", id.Gateway.URL, err), "is `exechost gateway` running there?")
	}
	return ws, nil
}
