package client

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/hint"
)

// DefaultConnectTimeout bounds a connect (TCP, WebSocket and handshake)
// when Options.ConnectTimeout is zero.
const DefaultConnectTimeout = 30 * time.Second

// ErrNoAnswer is wrapped when something accepted the connection (or the
// network holds it) but no handshake came back within the connect
// timeout.
var ErrNoAnswer = errors.New("no answer from the gateway")

// ErrUnreachable is wrapped when a connect failed without a gateway
// refusing it: nothing listens, the network failed, or the caller's
// context ended.
var ErrUnreachable = errors.New("gateway unreachable")

// Options describe one connection.
type Options struct {
	// Role is bridge.RoleAgent or bridge.RoleOperator.
	Role string
	// Auth is what the client proves and pins (FindAuth, StateDirAuth).
	Auth Auth
	// Client names the program in the connect request.
	Client bridge.ClientInfo
	// ConnectTimeout bounds the connect; 0 is DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// Warn receives the warning about an unpinned gateway; nil drops it.
	Warn io.Writer
	// OnEvent, if set, receives the gateway's events on this connection.
	OnEvent func(event string, payload json.RawMessage)
}

// Dial connects to the gateway at url as o.Role, proving o.Auth and
// checking the gateway's key against its pin. See the package doc for how
// failures are classified.
func Dial(ctx context.Context, url string, o Options) (*Client, error) {
	if err := CheckPlaintext(url); err != nil {
		return nil, err
	}
	if o.Auth.GatewayKey == "" && o.Warn != nil {
		fmt.Fprintf(o.Warn, "warning: no pinned gateway key (set %s, or use a credential file): the gateway at %s is not verified\n", EnvGatewayKey, url)
	}
	bo := bridge.Options{GatewayKey: o.Auth.GatewayKey, OnEvent: o.OnEvent}
	if o.Auth.Credential != nil {
		bo.Credential = o.Auth.Credential
	}
	limit := o.ConnectTimeout
	if limit <= 0 {
		limit = DefaultConnectTimeout
	}
	dctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		c, res, err := bridge.Dial(dctx, url, bridge.ConnectParams{
			Role:   o.Role,
			Auth:   bridge.Auth{Token: o.Auth.Token},
			Client: o.Client,
		}, WebSocketOptions(), bo)
		if err == nil {
			return &Client{conn: c, url: url, res: res}, nil
		}
		// A gateway whose handshake slots are taken (many clients of one
		// address connecting at once) says to come back in a second:
		// within the connect bound, this does; past it, the busy error.
		var be *bridge.Error
		if errors.As(err, &be) && be.Code == bridge.CodeBusy {
			t := time.NewTimer(busyRetry)
			select {
			case <-t.C:
				continue
			case <-dctx.Done():
				t.Stop()
			}
		}
		return nil, classify(ctx, url, limit, err)
	}
}

// busyRetry is how long Dial waits before it tries a busy gateway again
// (the Retry-After the gateway sends).
const busyRetry = time.Second

// classify sorts a failed connect (see the package doc). bridge.Dial's
// errors already name the URL.
func classify(ctx context.Context, url string, limit time.Duration, err error) error {
	var be *bridge.Error
	if errors.As(err, &be) || errors.Is(err, bridge.ErrBadFrame) || errors.Is(err, bridge.ErrGatewayKey) || errors.Is(err, bridge.ErrChannel) {
		return err // a refused handshake: a failure, not an absence
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return &dialError{kind: ErrNoAnswer, err: hint.Wrap(fmt.Errorf("no answer from the gateway at %s within %s", url, limit), "something accepts connections there but does not answer as an exechost gateway: is it overloaded, stopped in a debugger, or another program? --gateway or $EXECHOST_GATEWAY sets the URL")}
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		// Instead of the five nested layers of a refused dial.
		err = hint.Wrap(fmt.Errorf("no gateway answers at %s: connection refused", url), "start one with `exechost up` or `exechost gateway`; --gateway or $EXECHOST_GATEWAY sets the URL")
	}
	return &dialError{kind: ErrUnreachable, err: err}
}

// dialError is a connect failure of a kind (ErrNoAnswer, ErrUnreachable)
// whose message is err's: the kind is for errors.Is, not for the reader.
type dialError struct{ kind, err error }

func (e *dialError) Error() string        { return e.err.Error() }
func (e *dialError) Unwrap() []error      { return []error{e.kind, e.err} }
func (e *dialError) Is(target error) bool { return target == e.kind }

// CheckPlaintext refuses a ws:// URL whose host is not loopback unless
// $EXECHOST_INSECURE_PLAINTEXT=1.
func CheckPlaintext(raw string) error {
	u, err := neturl.Parse(raw)
	if err != nil {
		return fmt.Errorf("gateway URL %q: %w", raw, err)
	}
	if u.Scheme != "ws" || isLoopbackHost(u.Hostname()) || os.Getenv(EnvInsecurePlaintext) == "1" {
		return nil
	}
	return hint.Wrap(fmt.Errorf("refusing plain ws:// to %s: the connection would cross the network unencrypted", u.Host), fmt.Sprintf("serve the gateway with TLS and use wss://, or set %s=1 to accept the risk", EnvInsecurePlaintext))
}

// isLoopbackHost reports whether host is localhost or a loopback address.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// WebSocketOptions returns the WebSocket dial options a client uses: the
// certificate pin of $EXECHOST_TLS_FINGERPRINT, or nil (normal
// verification). For programs that open a raw WebSocket to a gateway (a
// probe) with the same transport checks as Dial.
func WebSocketOptions() *websocket.DialOptions {
	return pinnedDialOptions(os.Getenv(EnvTLSFingerprint))
}

// pinnedDialOptions returns dial options that accept exactly the
// certificate with fingerprint fp, or nil (normal verification) when fp is
// empty.
func pinnedDialOptions(fp string) *websocket.DialOptions {
	fp = strings.ReplaceAll(strings.TrimPrefix(strings.ToLower(strings.TrimSpace(fp)), "sha256:"), ":", "")
	if fp == "" {
		return nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // replaced by the pin check below
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("gateway sent no certificate")
			}
			sum := sha256.Sum256(cs.PeerCertificates[0].Raw)
			if got := hex.EncodeToString(sum[:]); got != fp {
				return fmt.Errorf("gateway certificate fingerprint %s does not match %s=%s", got, EnvTLSFingerprint, fp)
			}
			return nil
		},
	}
	return &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}}
}
