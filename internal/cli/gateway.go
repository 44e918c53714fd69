package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/config"
	"github.com/exechost/exechost/internal/gateway"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/logging"
	"github.com/exechost/exechost/internal/service"
)

func init() { register("gateway", newGatewayCmd) }

// logFlags are the operational flags of the daemons: logging for all, and
// for the gateway an opt-in metrics listener and the drain timeout.
type logFlags struct {
	format, level string
	metricsListen string
	drainTimeout  time.Duration
	// insecurePlaintext is --insecure-plaintext: serve ws:// beyond
	// loopback (gateway.RunOptions.InsecurePlaintext).
	insecurePlaintext bool
	// warmInterpreters is --warm-interpreters: the host engine's pool
	// of warm interpreters (host.Options.WarmInterpreters).
	warmInterpreters int
}

// addWarm registers --warm-interpreters on a command that runs a daemon's
// host engine.
func (l *logFlags) addWarm(cmd *cobra.Command) {
	cmd.Flags().IntVar(&l.warmInterpreters, "warm-interpreters", host.DefaultWarmInterpreters,
		"processes kept started ahead of need: each serves one command, as its interpreter or as the confining launcher of one that starts directly (0: none)")
}

// checkWarm refuses a negative --warm-interpreters.
func (l *logFlags) checkWarm() error {
	if l.warmInterpreters < 0 {
		return usagef("--warm-interpreters %d: must not be negative (0 keeps none)", l.warmInterpreters)
	}
	return nil
}

// addInsecure registers --insecure-plaintext on a command that runs a
// gateway.
func (l *logFlags) addInsecure(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&l.insecurePlaintext, "insecure-plaintext", false, "allow plain ws:// on a non-loopback --listen (everything but the handshake's proofs travels readable and forgeable; use TLS instead)")
}

func (l *logFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&l.format, "log-format", "text", "log format: text or json")
	cmd.Flags().StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
}

func (l *logFlags) logger(g *globals) (*slog.Logger, error) {
	lg, err := logging.New(g.stderr, l.format, l.level)
	if err != nil {
		return nil, usageError{err}
	}
	return lg, nil
}

func newGatewayCmd(g *globals) *cobra.Command {
	var cfgPath, listen, webAddr string
	var lf logFlags
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Run the gateway: agents' exec calls are routed to the sandbox, this host or paired nodes",
		Long: `Run the gateway daemon. It listens on loopback by default (gateway.listen in
exechost.json or --listen), serves wss:// when gateway.tls.cert/key are set,
and writes its token to <state>/gateway.json (0600), where local CLIs read it.

SIGHUP reloads exechost.json; a bad file keeps the running configuration and
logs why. SIGINT/SIGTERM stop the gateway cleanly.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			started, err := g.gatewayWebStarter(ctx, webAddr) // gateway_web.go
			if err != nil {
				return err
			}
			return g.runGateway(ctx, cfgPath, listen, lf, started, nil)
		},
	}
	cmd.Flags().StringVar(&webAddr, "web", "", "also serve the approver web UI for operators on this loopback address (e.g. 127.0.0.1:8787); prints its URL with a per-run secret")
	cmd.Flags().StringVar(&cfgPath, "config", "", "config file (default <state>/exechost.json; optional there)")
	cmd.Flags().StringVar(&listen, "listen", "", "listen address (default gateway.listen, else "+config.DefaultListen+")")
	lf.add(cmd)
	lf.addInsecure(cmd)
	lf.addWarm(cmd)
	cmd.Flags().StringVar(&lf.metricsListen, "metrics-listen", "", "serve Prometheus /metrics on this address (opt-in; e.g. 127.0.0.1:9464)")
	cmd.Flags().DurationVar(&lf.drainTimeout, "drain-timeout", gateway.DefaultDrainTimeout, "on SIGTERM, how long running execs may finish before everyone is disconnected")
	cmd.AddCommand(newJoinKeyCmd(g))
	cmd.AddCommand(serviceCommands(g, service.KindGateway)...)
	return cmd
}

// runGateway runs gateway.Run with the daemon flags; onStart (may be nil)
// is told the gateway's URL and the gateway once it serves.
func (g *globals) runGateway(ctx context.Context, cfgPath, listen string, lf logFlags, onStart func(string, *gateway.Gateway), embedded *config.Config) error {
	log, err := lf.logger(g)
	if err != nil {
		return err
	}
	if err := lf.checkWarm(); err != nil {
		return err
	}
	dir, err := g.dir()
	if err != nil {
		return err
	}
	return gateway.Run(ctx, gateway.RunOptions{
		StateDir: dir, ConfigPath: cfgPath, Embedded: embedded, Listen: listen,
		MetricsListen: lf.metricsListen, DrainTimeout: lf.drainTimeout,
		Logger: log, Version: Version, OnStart: onStart, InsecurePlaintext: lf.insecurePlaintext,
		WarmInterpreters: lf.warmInterpreters,
	})
}

func newJoinKeyCmd(g *globals) *cobra.Command {
	var url, name string
	var ttl time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "join-key",
		Short: "Create a one-time key that pairs a headless node without approval",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ttl <= 0 || ttl > gateway.MaxJoinKeyTTL {
				return usagef("--ttl must be between 1s and %s", gateway.MaxJoinKeyTTL)
			}
			var res bridge.JoinKeyResult
			if err := g.call(cmd.Context(), url, bridge.MethodJoinKey, bridge.JoinKeyParams{TTLMs: ttl.Milliseconds()}, &res); err != nil {
				return err
			}
			if asJSON {
				return g.printJSON(res)
			}
			fmt.Fprintln(g.stdout, res.Key)
			fmt.Fprintf(g.stderr, "one-time join key, valid until %s; on the node run:\n  %s\n",
				time.UnixMilli(res.ExpiresAt).Format(time.DateTime), joinLine(res, url, name))
			g.pairingNote(cmd.Context(), url)
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "gateway", DefaultGateway, "gateway URL")
	cmd.Flags().DurationVar(&ttl, "ttl", gateway.DefaultJoinKeyTTL, "how long the key stays valid")
	cmd.Flags().StringVar(&name, "display-name", "", "the `NAME` the printed node line gives the node, which `--node NAME` then reaches (default: the node's host name)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// joinLine is the command the node runs to pair with a join key, usable
// as printed: the key reaches it through echo, a shell builtin, so it
// never shows in ps; without a name the node takes its host name, which
// the line spells out so that the name to pass as --node is visible.
func joinLine(res bridge.JoinKeyResult, url, name string) string {
	line := fmt.Sprintf("echo %s | exechost node run --gateway %s --join-key-file -", res.Key, url)
	if res.Fingerprint != "" {
		line += " --tls-fingerprint " + res.Fingerprint
	}
	if name == "" {
		return line + ` --display-name "$(hostname)"`
	}
	return line + " --display-name " + shellWord(name)
}
