package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/approvalroute"
	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/client"
	"github.com/exechost/exechost/internal/node"
	"github.com/exechost/exechost/internal/service"
)

func init() { register("node", newNodeCmd) }

// nodeRunFlags are `exechost node run`'s flags.
type nodeRunFlags struct {
	url, displayName, joinKey, fingerprint string
	execHost, execFallback                 string     // approver_exec.go
	route                                  routeFlags // approvals_route.go
	log                                    logFlags
	openclaw                               openclawFlags  // node_openclaw.go
	limits                                 nodeLimitFlags // node_limits.go
	// joinKeyFile and gatewayKey: --join-key-file (the key off argv) and
	// --gateway-key (the gateway identity to pin).
	joinKeyFile, gatewayKey string
	allowRemoteWidening     bool
}

func newNodeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Run this machine as a node: the gateway sends it commands, its own approvals decide",
	}
	var f nodeRunFlags
	run := &cobra.Command{
		Use:   "run",
		Short: "Connect to the gateway and serve system.run (headless)",
		Long: `Connect to the gateway and serve system.run, enforcing this machine's own
exec-approvals.json for every command. The node's identity (nodeId, token,
displayName, gateway URL and pinned TLS fingerprint) lives in
<state>/node.json (0600).

A new node waits as pending until ` + "`exechost nodes approve ID`" + ` on the gateway,
or pairs at once with the key from ` + "`exechost gateway join-key`" + `
(--join-key-file FILE, - for stdin, or $EXECHOST_JOIN_KEY).
The runner reconnects with jittered backoff when the gateway restarts; it
stops when its pairing is rejected or its token revoked.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var err error
			if f.openclaw.url != "" {
				err = g.runOpenClawNode(ctx, f)
			} else {
				err = g.runNode(ctx, f, nodeHooks{})
			}
			if err == nil && ctx.Err() != nil {
				// A signal ended it: say so, as `up` does, so a terminal
				// (or a service log) shows the node went away on purpose.
				fmt.Fprintln(g.stderr, "exechost: node stopped (it shows as disconnected on the gateway until it runs again)")
			}
			return err
		},
	}
	run.Flags().StringVar(&f.url, "gateway", "", "gateway `URL` (saved in node.json; default the saved one, else "+DefaultGateway+")")
	run.Flags().StringVar(&f.displayName, "display-name", "", "`NAME` shown in \"exechost nodes list\" (default the host name)")
	// Removed (argv is public): kept hidden so its use gets the fix, not
	// "unknown flag".
	run.Flags().StringVar(&f.joinKey, "join-key", "", "removed: use --join-key-file or $"+EnvJoinKey)
	_ = run.Flags().MarkHidden("join-key")
	run.Flags().StringVar(&f.joinKeyFile, "join-key-file", "", "read the one-time join key from \"exechost gateway join-key\" from `FILE` (\"-\": stdin) for headless pairing (default $"+EnvJoinKey+")")
	run.Flags().StringVar(&f.gatewayKey, "gateway-key", "", "pin the gateway's identity `KEY` (its log and `exechost up` print it); default: pinned at first contact")
	run.Flags().StringVar(&f.fingerprint, "tls-fingerprint", "", "expected SHA-256 fingerprint of a wss:// gateway's certificate")
	run.Flags().StringVar(&f.execHost, "exec-host", node.ExecHostLocal, "where system.run runs: `local|app` (app: forwarded to \"exechost approver --exec-host\" in the desktop session)")
	run.Flags().StringVar(&f.execFallback, "exec-fallback", node.FallbackLocal, "with --exec-host app, when the approver is unreachable: `local|deny` (local runs it here)")
	run.Flags().BoolVar(&f.allowRemoteWidening, strings.TrimPrefix(approvals.RemoteWideningFlag, "--"), false,
		"let the gateway widen this machine's exec-approvals.json (approvals set --node); without it a widening needs this machine's approver")
	f.route.add(run)
	f.log.add(run)
	f.log.addWarm(run)
	f.openclaw.add(run)
	f.limits.add(run)
	cmd.AddCommand(run)
	cmd.AddCommand(serviceCommands(g, service.KindNode)...)
	return cmd
}

// nodeHooks let `exechost up` follow its local node; both may be nil.
type nodeHooks struct {
	// pending is called with the node id when the gateway holds the node
	// for approval (a node without a token).
	pending func(nodeID string)
	// paired is called each time the node is connected and paired.
	paired func(nodeID string)
}

// check reports a bad flag value as a usage error before anything runs.
func (f nodeRunFlags) check() error {
	if _, err := node.ParseExecHost(f.execHost); err != nil {
		return usagef("--exec-host: %v", err)
	}
	if _, err := node.ParseExecFallback(f.execFallback); err != nil {
		return usagef("--exec-fallback: %v", err)
	}
	if _, err := approvalroute.ParseRoute(f.route.route); err != nil {
		return usagef("%v", err)
	}
	if f.route.promptTimeout < 0 {
		return usagef("--prompt-timeout must not be negative")
	}
	if err := f.log.checkWarm(); err != nil {
		return err
	}
	return f.limits.check()
}

// runNode checks the flags and runs node.Run until ctx ends.
func (g *globals) runNode(ctx context.Context, f nodeRunFlags, hooks nodeHooks) error {
	log, err := f.log.logger(g)
	if err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	dir, err := g.dir()
	if err != nil {
		return err
	}
	url := f.url
	if url == "" {
		if id, err := node.LoadIdentity(dir); err == nil && id.Gateway.URL != "" {
			url = id.Gateway.URL
		} else {
			url = DefaultGateway
		}
	}
	if err := client.CheckPlaintext(url); err != nil {
		return err
	}
	joinKey, err := g.secretArg("join key", f.joinKey, "--join-key", f.joinKeyFile, EnvJoinKey)
	if err != nil {
		return err
	}
	pending := func(id, fingerprint string) {
		// What the operator compares before approving: the same id and
		// fingerprint appear in `exechost nodes pending`.
		fmt.Fprintf(g.stderr, "exechost: waiting for approval: node %s, key fingerprint %s (on the gateway: compare with `exechost nodes pending`, then `exechost nodes approve %s`)\n", id, fingerprint, id)
	}
	if hooks.pending != nil {
		pending = func(id, _ string) { hooks.pending(id) }
	}
	return node.Run(ctx, node.RunOptions{
		StateDir: dir, GatewayURL: url, DisplayName: f.displayName, JoinKey: joinKey, TLSFingerprint: f.fingerprint, GatewayKey: f.gatewayKey,
		ExecHost: f.execHost, ExecFallback: f.execFallback, Route: f.route.route, PromptTimeout: f.route.promptTimeout,
		MaxRuns: f.limits.maxRuns, WarmInterpreters: f.log.warmInterpreters, Logger: log, Version: Version, OnPending: pending, OnPaired: hooks.paired,
		AllowRemoteWidening: f.allowRemoteWidening,
	})
}
