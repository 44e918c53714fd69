package cli

import (
	"context"
	"fmt"
	"github.com/exechost/exechost/internal/metrics"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/config"
	"github.com/exechost/exechost/internal/gateway"
	"github.com/exechost/exechost/internal/logging"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/sandbox/pick"
	"github.com/exechost/exechost/internal/service"
	"github.com/exechost/exechost/internal/state"
)

func init() { register(newGatewayCmd) }

// logFlags are the logging flags of the daemons.
// logFlags are the operational flags of the daemons: logging for all, and
// for the gateway an opt-in metrics listener and the drain timeout.
type logFlags struct {
	format, level string
	metricsListen string
	drainTimeout  time.Duration
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
			started, err := g.gatewayWebStarter(ctx, webAddr) // approvals_route.go
			if err != nil {
				return err
			}
			return g.runGateway(ctx, cfgPath, listen, lf, started)
		},
	}
	cmd.Flags().StringVar(&webAddr, "web", "", "also serve the approver web UI for operators on this loopback address (e.g. 127.0.0.1:8787); prints its URL with a per-run secret")
	cmd.Flags().StringVar(&cfgPath, "config", "", "config file (default <state>/exechost.json; optional there)")
	cmd.Flags().StringVar(&listen, "listen", "", "listen address (default gateway.listen, else "+config.DefaultListen+")")
	lf.add(cmd)
	cmd.Flags().StringVar(&lf.metricsListen, "metrics-listen", "", "serve Prometheus /metrics on this address (opt-in; e.g. 127.0.0.1:9464)")
	cmd.Flags().DurationVar(&lf.drainTimeout, "drain-timeout", gateway.DefaultDrainTimeout, "on SIGTERM, how long running execs may finish before everyone is disconnected")
	cmd.AddCommand(newJoinKeyCmd(g))
	cmd.AddCommand(serviceCommands(g, service.KindGateway)...)
	return cmd
}

// gatewayStarted is told the listening address and the gateway once it
// serves (for `exechost up`).
type gatewayStarted func(addr string, gw *gateway.Gateway)

// runGateway runs a gateway until ctx ends. cfgPath "" means the state
// directory's exechost.json if present; embedded, when non-nil, is used
// when that file does not exist.
func (g *globals) runGateway(ctx context.Context, cfgPath, listen string, lf logFlags, started gatewayStarted, embedded ...*config.Config) error {
	log, err := lf.logger(g)
	if err != nil {
		return err
	}
	dir, err := g.dir()
	if err != nil {
		return err
	}
	if err := state.Ensure(dir); err != nil {
		return err
	}
	explicit := cfgPath != ""
	if !explicit {
		cfgPath = filepath.Join(dir, state.ConfigFile)
	}
	cfg, err := config.Load(cfgPath, !explicit)
	if err != nil {
		return err
	}
	if cfg.Path == "" && len(embedded) > 0 && embedded[0] != nil {
		cfg = embedded[0]
	}
	if listen == "" {
		listen = cfg.Gateway.Listen
	}
	// One audit log for the gateway's own decisions and its host engine's
	// runs: <state>/audit.jsonl, one hash chain.
	eng, rec, err := g.localEngineAudited(dir)
	if err != nil {
		return err
	}
	defer eng.Close()
	defer rec.Close()
	eng.Host, eng.NodeID = policy.HostGateway, "gateway"
	// host=sandbox: the configured backend, or none with the reason; a
	// missing sandbox is never replaced by running on the host.
	sb, sbErr := pick.Open(ctx, cfg.Sandbox, dir)
	if sbErr != nil {
		sb = nil
		log.Warn("host=sandbox unavailable", "err", sbErr)
	} else {
		log.Info("sandbox backend ready", "backend", sb.Name())
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if err := sb.Close(cctx); err != nil {
				log.Warn("close sandbox backend", "err", err)
			}
		}()
	}
	var m *metrics.Metrics
	if lf.metricsListen != "" {
		m = metrics.New()
		ln, err := net.Listen("tcp", lf.metricsListen)
		if err != nil {
			return fmt.Errorf("metrics listener %s: %w", lf.metricsListen, err)
		}
		log.Info("serving metrics", "addr", "http://"+ln.Addr().String()+"/metrics")
		go func() {
			if err := m.ServeListener(ctx, ln); err != nil {
				log.Warn("metrics server stopped", "err", err)
			}
		}()
	}
	gw, err := gateway.New(gateway.Options{
		StateDir: dir, Config: cfg, Executor: eng, Sandbox: sb, SandboxError: sbErr, Logger: log, Version: Version,
		Metrics: m, DrainTimeout: lf.drainTimeout, Audit: auditOrNil(rec),
	})
	if err != nil {
		return err
	}
	eng.OnEvent = gw.HostEvent
	if err := applyRoute(eng, cfg.Approvals.Route, gw.Prompter()); err != nil { // approvals.route
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (hint: another gateway running? use --listen)", listen, err)
	}
	scheme := "ws"
	if cfg.Gateway.TLS.Cert != "" {
		scheme = "wss"
	} else if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() {
		log.Warn("listening beyond loopback without TLS: tokens and commands travel in clear (hint: set gateway.tls.cert and .key in exechost.json)", "addr", ln.Addr().String())
	}
	url := scheme + "://" + ln.Addr().String()
	log.Info("gateway listening", "url", url, "token", gateway.TokenPath(dir), "config", cfg.Path)

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if cfg.Path == "" && !explicit {
					if _, err := os.Stat(cfgPath); err != nil {
						log.Info("SIGHUP: no config file; keeping the built-in configuration", "path", cfgPath)
						continue
					}
				}
				next, err := config.Load(cfgPath, false)
				if err != nil {
					log.Error("SIGHUP: config reload failed; keeping the running configuration", "err", err)
					continue
				}
				gw.SetConfig(next)
				log.Info("SIGHUP: configuration reloaded", "path", cfgPath)
				if !reflect.DeepEqual(next.Sandbox, cfg.Sandbox) {
					log.Warn("SIGHUP: sandbox settings change after a gateway restart")
				}
			}
		}
	}()
	_ = service.NotifyReady()
	if started != nil {
		go started(url, gw)
	}
	err = gw.Serve(ctx, ln)
	_ = service.NotifyStopping()
	log.Info("gateway stopped")
	return err
}

// auditOrNil keeps a nil recorder a nil interface, so the gateway records
// nothing rather than calling a nil pointer's method by design.
func auditOrNil(rec *audit.Recorder) gateway.AuditRecorder {
	if rec == nil {
		return nil
	}
	return rec
}

func newJoinKeyCmd(g *globals) *cobra.Command {
	var url string
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
			fmt.Fprintf(g.stderr, "one-time join key, valid until %s; on the node run:\n  exechost node run --gateway %s --join-key %s",
				time.UnixMilli(res.ExpiresAt).Format(time.DateTime), url, res.Key)
			if res.Fingerprint != "" {
				fmt.Fprintf(g.stderr, " --tls-fingerprint %s", res.Fingerprint)
			}
			fmt.Fprintln(g.stderr)
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "gateway", DefaultGateway, "gateway URL")
	cmd.Flags().DurationVar(&ttl, "ttl", gateway.DefaultJoinKeyTTL, "how long the key stays valid")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
