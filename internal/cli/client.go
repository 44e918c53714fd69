package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	neturl "net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/client"
	"github.com/exechost/exechost/internal/config"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/state"
)

// Environment variables of client commands (internal/client reads them).
const (
	// EnvGatewayToken is client.EnvGatewayToken.
	EnvGatewayToken = client.EnvGatewayToken
	// EnvCredential is client.EnvCredential.
	EnvCredential = client.EnvCredential
	// EnvGatewayKey is client.EnvGatewayKey.
	EnvGatewayKey = client.EnvGatewayKey
	// EnvTLSFingerprint is client.EnvTLSFingerprint.
	EnvTLSFingerprint = client.EnvTLSFingerprint
	// EnvInsecurePlaintext is client.EnvInsecurePlaintext.
	EnvInsecurePlaintext = client.EnvInsecurePlaintext
)

// clientTimeout bounds a client command's connect and a short call.
const clientTimeout = client.DefaultConnectTimeout

// clientAuth finds the credential a client command connects with
// (client.FindAuth with --credential and the state directory).
func (g *globals) clientAuth() (client.Auth, error) {
	return client.FindAuth(g.credential, g.dir)
}

// holdsOperator reports whether this client's credential may connect as
// an operator (the gateway token, or an operator credential).
func (g *globals) holdsOperator() bool {
	a, err := g.clientAuth()
	return err == nil && a.Operator()
}

// dialGateway connects to the gateway at url with role (agent or
// operator) through internal/client, and maps its failure kinds to exit
// codes: no handshake in time is a timeout (124, as docs/cli.md says),
// anything else that left no gateway is "unavailable" (125).
func (g *globals) dialGateway(ctx context.Context, url, role string) (*client.Client, error) {
	a, err := g.clientAuth()
	if err != nil {
		return nil, err
	}
	if url, err = g.gatewayURL(url); err != nil {
		return nil, err
	}
	return g.dialGatewayAt(ctx, url, role, a)
}

// dialGatewayAt is dialGateway to exactly url (`up` probing the address it
// was asked to listen on).
func (g *globals) dialGatewayAt(ctx context.Context, url, role string, a client.Auth) (*client.Client, error) {
	c, err := client.Dial(ctx, url, client.Options{
		Role: role, Auth: a, Warn: g.stderr, ConnectTimeout: g.connectTimeout,
		Client: bridge.ClientInfo{Name: "exechost-cli", Version: Version, Platform: runtime.GOOS + "/" + runtime.GOARCH},
	})
	switch {
	case errors.Is(err, client.ErrNoAnswer):
		return nil, withCode(ExitTimeout, err)
	case errors.Is(err, client.ErrUnreachable):
		return nil, withCode(ExitUnavailable, err)
	}
	return c, err
}

// gatewayURL is the URL a client command dials: --gateway or
// $EXECHOST_GATEWAY as given; without either (the flag's built-in
// default), where the state directory's exechost.json says the gateway
// listens (gateway.listen, wss:// with gateway.tls), so a gateway moved off
// the default port is not replaced by whatever squats that port.
func (g *globals) gatewayURL(url string) (string, error) {
	if url != DefaultGateway || os.Getenv(EnvGateway) != "" {
		return url, nil
	}
	dir, err := g.dir()
	if err != nil {
		return url, nil // no state directory: nothing says otherwise
	}
	cfg, err := config.Load(filepath.Join(dir, state.ConfigFile), true)
	if err != nil {
		return "", hint.Wrap(fmt.Errorf("find the gateway's address: %w", err), "fix the configuration, or pass --gateway")
	}
	scheme := "ws://"
	if cfg.Gateway.TLS.Cert != "" {
		scheme = "wss://"
	}
	return localURL(scheme + cfg.Gateway.Listen), nil
}

// callTimeout bounds one call on a client connection: the client's own
// bound plus what the gateway may spend waiting for a node.
const callTimeout = clientTimeout + bridge.InvokeMargin

// withOperator runs fn on a fresh operator connection to url, under a
// deadline of calls × callTimeout, and closes the connection. fn's error
// is returned as a wire error.
func (g *globals) withOperator(ctx context.Context, url string, calls int, fn func(context.Context, *client.Client) error) error {
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
	return g.withOperator(ctx, url, 1, func(ctx context.Context, c *client.Client) error {
		return c.Call(ctx, method, params, out)
	})
}

// remoteApprovalsGet is `approvals get --node N`.
func (g *globals) remoteApprovalsGet(ctx context.Context, url, node string, asJSON bool) error {
	return g.withOperator(ctx, url, 1, func(ctx context.Context, c *client.Client) error {
		f, res, err := c.NodeApprovals(ctx, node)
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
	return g.withOperator(ctx, url, 2, func(ctx context.Context, c *client.Client) error {
		res, err := c.SetNodeApprovals(ctx, node, f, baseHash)
		if err != nil {
			return err
		}
		fmt.Fprintf(g.stdout, "wrote %s on node %s (hash %s)\n", res.Path, node, res.Hash)
		return nil
	})
}

// remoteApprovalsEdit applies edit to a paired node's exec-approvals.json
// through the gateway (client.EditNodeApprovals: a concurrent change is
// reread and the edit reapplied), each attempt bounded by two calls.
func (g *globals) remoteApprovalsEdit(ctx context.Context, url, node string, edit func(*approvals.File) error) error {
	c, err := g.dialGateway(ctx, url, bridge.RoleOperator)
	if err != nil {
		return err
	}
	defer c.Close("done")
	perAttempt := func(ctx context.Context) (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, 2*callTimeout)
	}
	return wireError(c.EditNodeApprovals(ctx, node, perAttempt, edit))
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

// secretArg returns a secret from a file ("-" reads stdin) or an
// environment variable, surrounding white space trimmed. flagVal is the
// removed secret-in-argv flag (--join-key, --openclaw-token): argv is
// world-readable in /proc/PID/cmdline, so a value there is refused with
// what to use instead, before the secret is used anywhere.
func (g *globals) secretArg(what, flagVal, flagName, file, env string) (string, error) {
	switch {
	case flagVal != "":
		return "", usageHint(fmt.Sprintf("put it in a file and pass %[1]s-file FILE, pipe it with `echo KEY | … %[1]s-file -` (echo is a shell builtin, never in ps), or set $%[2]s", flagName, env),
			"%s was removed: the %s would show in the process list to every user", flagName, what)
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
