package cli

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/gateway"
)

// EnvGatewayToken lets a client connect to a gateway whose state directory
// is not readable here (another machine, another user) with the gateway's
// token: an operator's secret, acting for any agent. Prefer an issued
// credential ($EXECHOST_CREDENTIAL).
const EnvGatewayToken = "EXECHOST_GATEWAY_TOKEN"

// EnvCredential names the client credential file when --credential is not
// given.
const EnvCredential = "EXECHOST_CREDENTIAL"

// EnvGatewayKey pins the gateway's identity key (as `exechost up` prints
// it) for a client that has neither a credential file (which carries the
// pin) nor the gateway's state directory.
const EnvGatewayKey = "EXECHOST_GATEWAY_KEY"

// EnvTLSFingerprint pins a wss:// gateway's certificate (SHA-256 of the
// leaf, hex) for client commands, for gateways with a self-signed
// certificate; without it the system's CAs verify the certificate.
const EnvTLSFingerprint = "EXECHOST_TLS_FINGERPRINT"

// clientTimeout bounds a client command's connect and a short call.
const clientTimeout = 30 * time.Second

// clientAuth is what a client command proves and pins when it connects.
type clientAuth struct {
	token      string                  // the gateway token (MAC'd, never sent)
	credential *gateway.CredentialFile // or an issued credential
	gatewayKey string                  // pinned gateway key; "" = unpinned
}

// clientAuth finds the credential a client command connects with:
// --credential or $EXECHOST_CREDENTIAL (a credential file, which pins the
// gateway's key), else $EXECHOST_GATEWAY_TOKEN, else the state
// directory's gateway.json. The gateway's key is pinned from the
// credential file, $EXECHOST_GATEWAY_KEY or the state directory.
func (g *globals) clientAuth() (clientAuth, error) {
	var a clientAuth
	path := g.credential
	if path == "" {
		path = os.Getenv(EnvCredential)
	}
	if path != "" {
		cf, err := gateway.ReadCredentialFile(path)
		if err != nil {
			return a, err
		}
		a.credential, a.gatewayKey = cf, cf.GatewayKey
		return a, nil
	}
	a.gatewayKey = os.Getenv(EnvGatewayKey)
	dir, err := g.dir()
	if err != nil {
		return a, err
	}
	if a.gatewayKey == "" {
		// The gateway of this state directory: its key is pinned here,
		// so a process squatting on the port learns nothing.
		if k, err := gateway.PublicKey(dir); err == nil {
			a.gatewayKey = k
		}
	}
	if t := os.Getenv(EnvGatewayToken); t != "" {
		a.token = t
		return a, nil
	}
	tok, err := gateway.ReadToken(dir)
	if errors.Is(err, fs.ErrNotExist) {
		// The common first-hour case: say it in one clause, not the
		// whole read → stat chain.
		return a, fmt.Errorf("no gateway token: %s does not exist (hint: start the gateway with this state directory (`exechost up`), run the client with the gateway's --state-dir, or pass --credential FILE from `exechost credentials issue`)", gateway.TokenPath(dir))
	}
	if err != nil {
		return a, fmt.Errorf("%w (hint: run the client with the gateway's --state-dir, or pass --credential FILE)", err)
	}
	if a.gatewayKey == "" {
		return a, fmt.Errorf("%s has a gateway token but no gateway key to check the gateway against (hint: start the gateway once with this state directory; it creates %s)", dir, gateway.KeyPath(dir))
	}
	a.token = tok
	return a, nil
}

// holdsOperator reports whether this client's credential may connect as
// an operator (the gateway token, or an operator credential).
func (g *globals) holdsOperator() bool {
	a, err := g.clientAuth()
	return err == nil && (a.credential == nil || a.credential.Role == bridge.RoleOperator)
}

// dialGateway connects to the gateway at url with role (agent or
// operator), proving the credential clientAuth finds and checking the
// gateway's key against the pin.
func (g *globals) dialGateway(ctx context.Context, url, role string) (*bridge.Conn, error) {
	a, err := g.clientAuth()
	if err != nil {
		return nil, err
	}
	if err := checkPlaintext(url); err != nil {
		return nil, err
	}
	if a.gatewayKey == "" {
		fmt.Fprintf(g.stderr, "warning: no pinned gateway key (set %s, or use a credential file): the gateway at %s is not verified\n", EnvGatewayKey, url)
	}
	opts := bridge.Options{GatewayKey: a.gatewayKey}
	if a.credential != nil {
		opts.Credential = a.credential
	}
	limit := g.connectTimeout
	if limit <= 0 {
		limit = clientTimeout
	}
	dctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	c, _, err := bridge.Dial(dctx, url, bridge.ConnectParams{
		Role:   role,
		Auth:   bridge.Auth{Token: a.token},
		Client: bridge.ClientInfo{Name: "exechost-cli", Version: Version, Platform: runtime.GOOS + "/" + runtime.GOARCH},
	}, pinnedDialOptions(os.Getenv(EnvTLSFingerprint)), opts)
	if err != nil {
		// bridge.Dial's errors already name the URL. A refused
		// handshake (bad token, bad frame, another gateway) is a
		// failure; anything else means nothing usable answered there.
		var be *bridge.Error
		if errors.As(err, &be) || errors.Is(err, bridge.ErrBadFrame) || errors.Is(err, bridge.ErrGatewayKey) {
			return nil, err
		}
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			// Something accepted the connection (or the network holds
			// it) but no handshake came back in time: a timeout (124),
			// as docs/cli.md says, not "unavailable".
			return nil, withCode(ExitTimeout, fmt.Errorf("no answer from the gateway at %s within %s (hint: something accepts connections there but does not answer as an exechost gateway: is it overloaded, stopped in a debugger, or another program? --gateway or $%s sets the URL)", url, limit, EnvGateway))
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			// Instead of the five nested layers of a refused dial.
			err = fmt.Errorf("no gateway answers at %s: connection refused (hint: start one with `exechost up` or `exechost gateway`; --gateway or $%s sets the URL)", url, EnvGateway)
		}
		return nil, withCode(ExitUnavailable, err)
	}
	return c, nil
}

// callTimeout bounds one call on a client connection: the client's own
// bound plus what the gateway may spend waiting for a node.
const callTimeout = clientTimeout + gateway.InvokeMargin

// withOperator runs fn on a fresh operator connection to url, under a
// deadline of calls × callTimeout, and closes the connection. fn's error
// is returned as a wire error.
func (g *globals) withOperator(ctx context.Context, url string, calls int, fn func(context.Context, *bridge.Conn) error) error {
	c, err := g.dialGateway(ctx, url, bridge.RoleOperator)
	if err != nil {
		return err
	}
	defer c.Close("done")
	cctx, cancel := context.WithTimeout(ctx, time.Duration(calls)*callTimeout)
	defer cancel()
	return wireError(fn(cctx, c))
}

// call runs one request on a fresh operator connection and closes it.
func (g *globals) call(ctx context.Context, url, method string, params, out any) error {
	return g.withOperator(ctx, url, 1, func(ctx context.Context, c *bridge.Conn) error {
		return c.Call(ctx, method, params, out)
	})
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

// nodeApprovals reads a paired node's exec-approvals.json through the
// gateway on c and parses it; the result's Hash is the base for a write.
func nodeApprovals(ctx context.Context, c *bridge.Conn, node string) (*approvals.File, bridge.ApprovalsGetResult, error) {
	res, err := bridge.NodeApprovalsGet(ctx, c, node)
	if err != nil {
		return nil, res, fmt.Errorf("get approvals of node %s: %w", node, err)
	}
	f, err := approvals.Parse(node+":"+res.Path, res.File)
	return f, res, err
}

// remoteApprovalsGet is `approvals get --node N`.
func (g *globals) remoteApprovalsGet(ctx context.Context, url, node string, asJSON bool) error {
	return g.withOperator(ctx, url, 1, func(ctx context.Context, c *bridge.Conn) error {
		f, res, err := nodeApprovals(ctx, c, node)
		if err != nil {
			return err
		}
		v, err := buildView(node+":"+res.Path, f)
		if err != nil {
			return err
		}
		v.Hash = res.Hash
		if asJSON {
			return g.printJSON(v)
		}
		printView(g, v)
		fmt.Fprintf(g.stdout, "\nhash: %s\n", res.Hash)
		return nil
	})
}

// remoteApprovalsSet is `approvals set --file F --node N` without a base
// hash: it bases the write on the node's current file, so only a change
// made between that read and the write is detected.
func (g *globals) remoteApprovalsSet(ctx context.Context, url, node string, f *approvals.File) error {
	return g.remoteApprovalsSetBase(ctx, url, node, f, "")
}

// remoteApprovalsSetBase is `approvals set --file F --node N --base-hash H`:
// the write succeeds only if the node's file still hashes to H (the hash
// `approvals get --node N --json` printed). An empty H reads it first.
func (g *globals) remoteApprovalsSetBase(ctx context.Context, url, node string, f *approvals.File, baseHash string) error {
	data, err := f.Marshal()
	if err != nil {
		return fmt.Errorf("encode approvals: %w", err)
	}
	return g.withOperator(ctx, url, 2, func(ctx context.Context, c *bridge.Conn) error {
		if baseHash == "" {
			cur, err := bridge.NodeApprovalsGet(ctx, c, node)
			if err != nil {
				return fmt.Errorf("get approvals of node %s: %w", node, err)
			}
			baseHash = cur.Hash
		}
		res, err := bridge.NodeApprovalsSet(ctx, c, node, data, baseHash)
		if err != nil {
			return err
		}
		fmt.Fprintf(g.stdout, "wrote %s on node %s (hash %s)\n", res.Path, node, res.Hash)
		return nil
	})
}

// remoteEditAttempts bounds how often remoteApprovalsEdit rereads and
// reapplies its edit when the node's file changed in between.
const remoteEditAttempts = 3

// remoteApprovalsEdit applies edit to a paired node's exec-approvals.json
// through the gateway: read, edit, write with the read's hash as base. A
// concurrent change makes the write stale; the edit is then reapplied to
// the fresh file, so nobody's change is lost.
func (g *globals) remoteApprovalsEdit(ctx context.Context, url, node string, edit func(*approvals.File) error) error {
	c, err := g.dialGateway(ctx, url, bridge.RoleOperator)
	if err != nil {
		return err
	}
	defer c.Close("done")
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 2*callTimeout)
		err := func() error {
			defer cancel()
			f, cur, err := nodeApprovals(cctx, c, node)
			if err != nil {
				return err
			}
			if err := edit(f); err != nil {
				return err
			}
			data, err := f.Marshal()
			if err != nil {
				return fmt.Errorf("encode approvals: %w", err)
			}
			_, err = bridge.NodeApprovalsSet(cctx, c, node, data, cur.Hash)
			return err
		}()
		if !errors.Is(err, bridge.ErrStaleApprovals) || attempt == remoteEditAttempts {
			return wireError(err)
		}
	}
}

// EnvInsecurePlaintext, set to 1, lets a client connect to a gateway on
// another host over plain ws://, where anyone on the path reads and
// rewrites the traffic.
const EnvInsecurePlaintext = "EXECHOST_INSECURE_PLAINTEXT"

// checkPlaintext refuses a ws:// URL whose host is not loopback unless
// $EXECHOST_INSECURE_PLAINTEXT=1.
func checkPlaintext(raw string) error {
	u, err := neturl.Parse(raw)
	if err != nil {
		return fmt.Errorf("gateway URL %q: %w", raw, err)
	}
	if u.Scheme != "ws" || isLoopbackHost(u.Hostname()) || os.Getenv(EnvInsecurePlaintext) == "1" {
		return nil
	}
	return fmt.Errorf("refusing plain ws:// to %s: the connection would cross the network unencrypted (hint: serve the gateway with TLS and use wss://, or set %s=1 to accept the risk)", u.Host, EnvInsecurePlaintext)
}

// isLoopbackHost reports whether host is localhost or a loopback address.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// localURL is how a process on the gateway's machine reaches a gateway
// listening at url: an unspecified host (0.0.0.0, or :: which Go listens
// on for both) becomes 127.0.0.1, which the gateway's Host check accepts.
func localURL(url string) string {
	u, err := neturl.Parse(url)
	if err != nil {
		return url
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsUnspecified() {
		return url
	}
	u.Host = net.JoinHostPort("127.0.0.1", u.Port())
	return u.String()
}

// EnvJoinKey gives `exechost node run` its one-time join key without
// putting it in argv, where every user's ps reads it.
const EnvJoinKey = "EXECHOST_JOIN_KEY"

// secretArg returns a secret from, in order: a deprecated flag value
// (with a warning: argv is world-readable), a file ("-" reads stdin), or
// an environment variable. Surrounding white space is trimmed.
func (g *globals) secretArg(what, flagVal, flagName, file, env string) (string, error) {
	switch {
	case flagVal != "":
		fmt.Fprintf(g.stderr, "warning: %s is deprecated: the %s shows in the process list to every user (hint: use %s-file FILE, %s-file - for stdin, or $%s)\n", flagName, what, flagName, flagName, env)
		return flagVal, nil
	case file == "-":
		b, err := io.ReadAll(io.LimitReader(os.Stdin, 4096))
		if err != nil {
			return "", fmt.Errorf("read the %s from stdin: %w", what, err)
		}
		return strings.TrimSpace(string(b)), nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read the %s: %w", what, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return strings.TrimSpace(os.Getenv(env)), nil
}
