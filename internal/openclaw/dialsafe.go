package openclaw

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"strings"
	"sync/atomic"

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
//   - over wss:// with a pinned certificate fingerprint (Options.TLSFingerprint,
//     `node run --tls-fingerprint`, else $EXECHOST_TLS_FINGERPRINT as for
//     every exechost client), the TLS handshake accepts exactly the
//     certificate whose SHA-256 is the pin, and fails before the HTTP
//     upgrade, so before any byte of the token. Without a pin, TLS's
//     normal verification (the system's CA roots, the host name) is what
//     authenticates the gateway.

// tokenSafeTransport checks p's URL and returns the transport the dial
// uses: one whose connections to loopback are checked for their owner
// when a token will be sent, and whose TLS handshake checks the pin when
// one is set. pinErr reports, after a failed dial, a pin mismatch with
// its hint (the TLS stack does not keep the error in the chain it
// returns).
func tokenSafeTransport(p dialParams) (tr *http.Transport, pinErr func() error, err error) {
	noPinErr := func() error { return nil }
	if err := client.CheckPlaintext(p.URL); err != nil {
		return nil, nil, fmt.Errorf("openclaw: %w", err)
	}
	u, err := neturl.Parse(p.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("openclaw gateway URL %q: %w", p.URL, err)
	}
	tr = http.DefaultTransport.(*http.Transport).Clone()
	pinErr = noPinErr
	if u.Scheme == "wss" {
		pin, err := tlsPin(p.TLSFingerprint)
		if err != nil {
			return nil, nil, err
		}
		if pin != "" {
			pinErr = pinCertificate(tr, u.Host, pin)
		}
	}
	if p.Token == "" || p.anyOwner || !loopbackHost(u.Hostname()) {
		return tr, pinErr, nil
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
	return tr, pinErr, nil
}

// tlsPin returns the pinned fingerprint, lower-case hex without colons:
// fp, else $EXECHOST_TLS_FINGERPRINT, else "" (no pin). A malformed pin is
// an error, never a silent "no pin".
func tlsPin(fp string) (string, error) {
	src := "--tls-fingerprint"
	if strings.TrimSpace(fp) == "" {
		fp, src = os.Getenv(client.EnvTLSFingerprint), "$"+client.EnvTLSFingerprint
	}
	fp = strings.ReplaceAll(strings.TrimPrefix(strings.ToLower(strings.TrimSpace(fp)), "sha256:"), ":", "")
	if fp == "" {
		return "", nil
	}
	if b, err := hex.DecodeString(fp); err != nil || len(b) != sha256.Size {
		return "", hint.Wrap(fmt.Errorf("openclaw: %s %q is not a SHA-256 fingerprint", src, fp), "give the 64 hex digits of the certificate's SHA-256 (colons and a sha256: prefix are accepted): `openssl x509 -in cert.pem -noout -fingerprint -sha256`")
	}
	return fp, nil
}

// errPinMismatch is what a pinned handshake fails with.
var errPinMismatch = errors.New("certificate fingerprint mismatch")

// pinCertificate makes tr's TLS handshakes accept exactly the certificate
// whose SHA-256 is pin, and returns the mismatch error of the last
// failed one (nil when none failed on the pin).
func pinCertificate(tr *http.Transport, host, pin string) func() error {
	var mismatch atomic.Pointer[error]
	tr.TLSClientConfig = &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The pin replaces the CA check: it names one certificate, which
		// a self-signed OpenClaw certificate needs.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				err := fmt.Errorf("%w: %s sent no certificate", errPinMismatch, host)
				mismatch.Store(&err)
				return err
			}
			sum := sha256.Sum256(cs.PeerCertificates[0].Raw)
			if got := hex.EncodeToString(sum[:]); got != pin {
				err := hint.Wrap(fmt.Errorf("refusing to send OpenClaw's token to %s: %w: its certificate's SHA-256 is %s, pinned %s", host, errPinMismatch, got, pin),
					"someone else may be answering at that address; if OpenClaw's certificate was replaced on purpose, update --tls-fingerprint or $"+client.EnvTLSFingerprint)
				mismatch.Store(&err)
				return err
			}
			return nil
		},
	}
	return func() error {
		if e := mismatch.Load(); e != nil {
			return *e
		}
		return nil
	}
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
