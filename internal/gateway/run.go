package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"syscall"
	"time"

	"github.com/exechost/exechost/internal/approvalroute"
	"github.com/exechost/exechost/internal/asksock"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/config"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/metrics"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/sandbox/pick"
	"github.com/exechost/exechost/internal/service"
	"github.com/exechost/exechost/internal/state"
	"github.com/exechost/exechost/internal/trace"
)

// SandboxCloseTimeout bounds closing the sandbox backend when the gateway
// stops (a Docker backend removes its containers).
const SandboxCloseTimeout = 30 * time.Second

// RunOptions configure Run: the gateway daemon as `exechost gateway` and
// `exechost up` run it.
type RunOptions struct {
	// StateDir is the gateway's state directory (created if missing).
	StateDir string
	// ConfigPath is the config file; "" means <StateDir>/exechost.json,
	// which may be absent (the built-in defaults, or Embedded, apply).
	ConfigPath string
	// Embedded replaces the built-in defaults when ConfigPath is "" and
	// the state directory has no exechost.json (`exechost up`).
	Embedded *config.Config
	// Listen is the listen address; "" means gateway.listen.
	Listen string
	// MetricsListen, when set, serves Prometheus /metrics there.
	MetricsListen string
	// DrainTimeout is Options.DrainTimeout.
	DrainTimeout time.Duration
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger
	// Version is reported to clients.
	Version string
	// Reload asks for a configuration reload on every receive; nil means
	// on SIGHUP.
	Reload <-chan os.Signal
	// OnStart is called (in its own goroutine) with the gateway's URL and
	// the gateway once it serves: `up` and the operator web UI attach here.
	OnStart func(url string, g *Gateway)
	// InsecurePlaintext allows plain ws:// on an address beyond loopback
	// (--insecure-plaintext); without it such a listen address needs
	// gateway.tls.
	InsecurePlaintext bool
	// WarmInterpreters is host.Options.WarmInterpreters for the
	// host=gateway engine: interpreter processes kept started ahead of
	// need (0: none).
	WarmInterpreters int
}

// Run runs a gateway daemon until ctx ends: it loads the configuration,
// opens the audit log, builds the host=gateway engine and the sandbox
// backend, serves metrics when asked, listens, and reloads the
// configuration on request (a bad file keeps the running one). It is the
// whole daemon; the CLI only parses flags.
func Run(ctx context.Context, opts RunOptions) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	dir := opts.StateDir
	if err := state.Ensure(dir); err != nil {
		return err
	}
	src := configSource{path: opts.ConfigPath, explicit: opts.ConfigPath != ""}
	if !src.explicit {
		src.path = filepath.Join(dir, state.ConfigFile)
	}
	cfg, err := config.Load(src.path, !src.explicit)
	if err != nil {
		return err
	}
	if cfg.Path == "" && opts.Embedded != nil {
		cfg = opts.Embedded
	}
	listen := opts.Listen
	if listen == "" {
		listen = cfg.Gateway.Listen
	}
	route, err := approvalroute.ParseRoute(cfg.Approvals.Route)
	if err != nil {
		return fmt.Errorf("approvals.route: %w", err)
	}
	// One audit log for the gateway's own decisions and its host engine's
	// runs: <state>/audit.jsonl, one hash chain.
	rec := host.OpenAudit(dir, func(err error) { log.Error("audit", "err", err) })
	defer rec.Close()
	// One receipt chain, signed with gateway.key, for the gateway
	// engine's runs and the countersignatures of node runs.
	rcpt := host.OpenReceipts(dir, state.KeyPath(dir), "gateway", func(err error) { log.Error("receipts", "err", err) })
	defer rcpt.Close()
	// host=sandbox: the configured backend, or none with the reason; a
	// missing sandbox is never replaced by running on the host.
	sb, sbErr := pick.Open(ctx, cfg.Sandbox, dir)
	if sbErr != nil {
		sb = nil
		log.Warn("host=sandbox unavailable", "err", sbErr)
	} else {
		log.Info("sandbox backend ready", "backend", sb.Name())
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), SandboxCloseTimeout)
			defer cancel()
			if err := sb.Close(cctx); err != nil {
				log.Warn("close sandbox backend", "err", err)
			}
		}()
	}
	var m *metrics.Metrics
	if opts.MetricsListen != "" {
		m = metrics.New()
		ln, err := metrics.Listen(opts.MetricsListen)
		if err != nil {
			return err
		}
		log.Info("serving metrics", "addr", "http://"+ln.Addr().String()+"/metrics")
		go func() {
			if err := m.ServeListener(ctx, ln); err != nil {
				log.Warn("metrics server stopped", "err", err)
			}
		}()
	}
	// Exec spans over OTLP, when telemetry.otlp.endpoint or the standard
	// OTEL_EXPORTER_OTLP_* variables say where (docs/tracing.md).
	tracer, err := trace.New(ctx, trace.Options{Endpoint: cfg.Telemetry.OTLP.Endpoint, Version: opts.Version})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tracer.Shutdown(sctx); err != nil {
			log.Warn("flush exec spans", "err", err)
		}
	}()
	if tracer != nil {
		log.Info("tracing execs over OTLP", "endpoint", cfg.Telemetry.OTLP.Endpoint)
	}
	gopts := Options{
		StateDir: dir, Config: cfg, Sandbox: sb, SandboxError: sbErr, Logger: log, Version: opts.Version,
		Metrics: m, DrainTimeout: opts.DrainTimeout, Receipts: rcpt, Tracer: tracer,
	}
	if rec != nil { // a nil *Recorder must stay a nil interface
		gopts.Audit = rec
	}
	gw, err := New(gopts)
	if err != nil {
		return err
	}
	eng, err := host.New(host.Options{
		StateDir: dir, Host: policy.HostGateway, NodeID: "gateway", Audit: rec, Receipts: rcpt, OnEvent: gw.HostEvent, SweepRunTemps: true,
		Prompter:         prompt.NewFair(asksock.LocalPrompter(dir)), // one agent's flood waits its turn
		Route:            approvalroute.Wrap(route, gw.Prompter()),
		WarmInterpreters: opts.WarmInterpreters,
		Warn:             func(err error) { log.Warn("process reaper unavailable", "err", err) },
	})
	if err != nil {
		return err
	}
	defer eng.Close()
	gw.opts.Executor = eng // before Serve: nothing runs yet
	if err := checkListen(listen, cfg.Gateway.TLS.Cert != "", opts.InsecurePlaintext); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return hint.Wrap(fmt.Errorf("listen on %s: %w", listen, err), "another gateway running? use --listen")
	}
	scheme := "ws"
	if cfg.Gateway.TLS.Cert != "" {
		scheme = "wss"
	} else if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() {
		log.Error("INSECURE: serving plain ws:// beyond loopback (--insecure-plaintext): anyone on the network path reads and rewrites every command, result and approval; only the handshake's proofs stay safe (hint: set gateway.tls.cert and .key in exechost.json)", "addr", ln.Addr().String())
	}
	url := scheme + "://" + ln.Addr().String()
	log.Info("gateway listening", "url", url, "token", state.TokenPath(dir), "config", cfg.Path,
		"gatewayKey", gw.PublicKey(), "gatewayFingerprint", bridge.KeyFingerprint(gw.PublicKey()))

	reload := opts.Reload
	if reload == nil {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		reload = hup
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-reload:
				if err := gw.reload(src, cfg); err != nil {
					log.Error("reload: keeping the running configuration", "err", err)
				}
			}
		}
	}()
	_ = service.NotifyReady()
	if opts.OnStart != nil {
		go opts.OnStart(url, gw)
	}
	err = gw.Serve(ctx, ln)
	_ = service.NotifyStopping()
	log.Info("gateway stopped")
	return err
}

// checkListen refuses plain ws:// on an address beyond loopback (an
// unspecified address such as 0.0.0.0 included) unless insecure is set.
func checkListen(listen string, tls, insecure bool) error {
	if tls || insecure {
		return nil
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", listen, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return hint.Wrap(fmt.Errorf("refusing to serve plain ws:// on %s: beyond loopback the traffic needs TLS", listen), "set gateway.tls.cert and .key in exechost.json, or pass --insecure-plaintext to accept that anyone on the path reads and rewrites it")
}

// configSource is where Run's configuration comes from: an explicit file
// must exist; the state directory's default one may be absent.
type configSource struct {
	path     string
	explicit bool
}

// reload reads src again and applies it through SetConfig, the same
// locked path as a web UI binding edit, so neither loses the other.
// started is the configuration the gateway started with: settings that
// only take effect at start (the sandbox) are compared against it. A file
// that fails to load changes nothing.
// The optional default file being absent keeps the running (built-in or
// embedded) configuration and is not an error.
func (g *Gateway) reload(src configSource, started *config.Config) error {
	if !src.explicit {
		if _, err := os.Stat(src.path); err != nil {
			g.log.Info("reload: no config file; keeping the built-in configuration", "path", src.path)
			return nil
		}
	}
	next, err := config.Load(src.path, false)
	if err != nil {
		return err
	}
	g.SetConfig(next)
	g.log.Info("configuration reloaded", "path", src.path)
	if !reflect.DeepEqual(next.Sandbox, started.Sandbox) {
		g.log.Warn("reload: sandbox settings change after a gateway restart")
	}
	return nil
}
