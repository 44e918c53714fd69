package cli

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
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
// is not readable here (another machine, another user).
const EnvGatewayToken = "EXECHOST_GATEWAY_TOKEN"

// EnvTLSFingerprint pins a wss:// gateway's certificate (SHA-256 of the
// leaf, hex) for client commands, for gateways with a self-signed
// certificate; without it the system's CAs verify the certificate.
const EnvTLSFingerprint = "EXECHOST_TLS_FINGERPRINT"

// clientTimeout bounds a client command's connect and a short call.
const clientTimeout = 30 * time.Second

// gatewayToken returns the token a local CLI presents: $EXECHOST_GATEWAY_TOKEN,
// else the state directory's gateway.json.
func (g *globals) gatewayToken() (string, error) {
	if t := os.Getenv(EnvGatewayToken); t != "" {
		return t, nil
	}
	dir, err := g.dir()
	if err != nil {
		return "", err
	}
	tok, err := gateway.ReadToken(dir)
	if errors.Is(err, fs.ErrNotExist) {
		// The common first-hour case: say it in one clause, not the
		// whole read → stat chain.
		return "", fmt.Errorf("no gateway token: %s does not exist (hint: start the gateway with this state directory (`exechost up`), run the client with the gateway's --state-dir, or set %s)", gateway.TokenPath(dir), EnvGatewayToken)
	}
	if err != nil {
		return "", fmt.Errorf("%w (hint: run the client with the gateway's --state-dir, or set %s)", err, EnvGatewayToken)
	}
	return tok, nil
}

// dialGateway connects to the gateway at url with role (agent or
// operator), authenticating with the gateway token.
func (g *globals) dialGateway(ctx context.Context, url, role string) (*bridge.Conn, error) {
	tok, err := g.gatewayToken()
	if err != nil {
		return nil, err
	}
	limit := g.connectTimeout
	if limit <= 0 {
		limit = clientTimeout
	}
	dctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	c, _, err := bridge.Dial(dctx, url, bridge.ConnectParams{
		Role:   role,
		Auth:   bridge.Auth{Token: tok},
		Client: bridge.ClientInfo{Name: "exechost-cli", Version: Version, Platform: runtime.GOOS + "/" + runtime.GOARCH},
	}, pinnedDialOptions(os.Getenv(EnvTLSFingerprint)), bridge.Options{})
	if err != nil {
		// bridge.Dial's errors already name the URL. A refused
		// handshake (bad token, bad frame) is a failure; anything
		// else means nothing usable answered there.
		var be *bridge.Error
		if errors.As(err, &be) || errors.Is(err, bridge.ErrBadFrame) {
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
