package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/exechost/exechost/internal/approvalroute"
	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/asksock"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/nodekey"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/service"
)

// RunOptions configure Run: the node daemon as `exechost node run` and
// `exechost up` run it.
type RunOptions struct {
	// StateDir, GatewayURL, DisplayName, JoinKey, TLSFingerprint, Logger,
	// Version and OnPaired are as in Options.
	StateDir, GatewayURL, DisplayName, JoinKey, TLSFingerprint string
	// GatewayKey pins the gateway's identity key (Options.GatewayKey).
	GatewayKey string
	Logger     *slog.Logger
	Version    string
	OnPaired   func(nodeID string)
	// OnPending runs when the gateway holds the node for approval, with
	// the key fingerprint the operator compares with `exechost nodes
	// pending` before approving.
	OnPending func(nodeID, fingerprint string)
	// ExecHost is where system.run runs: ExecHostLocal ("" too) or
	// ExecHostApp (forwarded to the desktop approver).
	ExecHost string
	// ExecFallback applies with ExecHostApp when the approver is
	// unreachable: FallbackLocal ("" too) or FallbackDeny.
	ExecFallback string
	// Route is approvals.route: where prompts for a human go ("" is
	// local: this machine's approver socket).
	Route string
	// PromptTimeout bounds a prompt (host.DefaultPromptTimeout when 0).
	PromptTimeout time.Duration
	// MaxRuns is Options.MaxRuns: system.run invokes in flight before
	// more are answered BUSY.
	MaxRuns int
	// WarmInterpreters is host.Options.WarmInterpreters: interpreter
	// processes the engine keeps started ahead of need (0: none).
	WarmInterpreters int
	// AllowRemoteWidening is Options.AllowRemoteWidening
	// (approvals.RemoteWideningFlag); without it this machine's approver
	// confirms each remote widening.
	AllowRemoteWidening bool
}

// Run runs a node daemon until ctx ends: it builds this machine's host
// engine (its own exec-approvals.json, approval route and audit log),
// the executor system.run goes to, and the Client that keeps the gateway
// connection. It is the whole daemon; the CLI only parses flags.
func Run(ctx context.Context, opts RunOptions) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	mode, err := ParseExecHost(opts.ExecHost)
	if err != nil {
		return fmt.Errorf("exec host: %w", err)
	}
	fallback, err := ParseExecFallback(opts.ExecFallback)
	if err != nil {
		return fmt.Errorf("exec fallback: %w", err)
	}
	route, err := approvalroute.ParseRoute(opts.Route)
	if err != nil {
		return fmt.Errorf("approvals route: %w", err)
	}
	// A malformed approvals file fails here, before New saves node.json
	// (which may drop a token for a changed gateway URL): bad input
	// changes nothing. host.New checks it again as it builds the engine.
	if _, err := approvals.NewStore(opts.StateDir).Ensure(); err != nil {
		return err
	}
	var r *Client
	r, err = New(Options{
		StateDir: opts.StateDir, GatewayURL: opts.GatewayURL, DisplayName: opts.DisplayName, JoinKey: opts.JoinKey,
		TLSFingerprint: opts.TLSFingerprint, GatewayKey: opts.GatewayKey, Logger: log, Version: opts.Version, MaxRuns: opts.MaxRuns,
		AllowRemoteWidening: opts.AllowRemoteWidening, ConfirmWidening: asksock.LocalPrompter(opts.StateDir).Prompt,
		OnPending: func(id string) {
			if opts.OnPending != nil {
				opts.OnPending(id, r.Fingerprint())
			}
		},
		OnPaired: func(id string) {
			_ = service.NotifyReady()
			if opts.OnPaired != nil {
				opts.OnPaired(id)
			}
		},
	})
	if err != nil {
		return err
	}
	rec := host.OpenAudit(opts.StateDir, func(err error) { log.Error("audit", "err", err) })
	defer rec.Close()
	rcpt := host.OpenReceipts(opts.StateDir, nodekey.Path(opts.StateDir), r.NodeID(), func(err error) { log.Error("receipts", "err", err) })
	defer rcpt.Close()
	eng, err := host.New(host.Options{
		StateDir: opts.StateDir, Host: policy.HostNode, NodeID: r.NodeID(), Audit: rec, Receipts: rcpt, OnEvent: r.HostEvent, SweepRunTemps: true,
		Prompter:      prompt.NewFair(asksock.LocalPrompter(opts.StateDir)), // one agent's flood waits its turn
		PromptTimeout: opts.PromptTimeout, WarmInterpreters: opts.WarmInterpreters,
		Route: approvalroute.Wrap(route, r.GatewayPrompter()),
		Warn:  func(err error) { log.Warn("process reaper unavailable", "err", err) },
	})
	if err != nil {
		return err
	}
	defer eng.Close()
	exe, err := executor(opts.StateDir, eng, mode, fallback)
	if err != nil {
		return err
	}
	if fw, ok := exe.(*Forwarder); ok {
		fw.NodeID, fw.OnEvent, fw.Logger = r.NodeID, r.HostEvent, log
	}
	r.opts.Executor = exe // before Run: no system.run arrives earlier
	if rec != nil {       // a nil *Recorder must stay a nil interface
		r.opts.Audit = rec
	}
	log.Info("node starting", "node", r.NodeID(), "gateway", opts.GatewayURL, "state", opts.StateDir)
	err = r.Run(ctx)
	_ = service.NotifyStopping()
	return err
}

// executor returns what system.run runs with: eng itself for
// ExecHostLocal, else a Forwarder to this state directory's approver
// (`exechost approver --exec-host`) that falls back to eng or denies.
func executor(dir string, eng *host.Engine, mode, fallback string) (Executor, error) {
	if mode == ExecHostLocal {
		return eng, nil
	}
	st := approvals.NewStore(dir)
	f, err := st.Load()
	if err != nil {
		return nil, err
	}
	return &Forwarder{
		Client:   &asksock.ExecClient{SocketPath: st.SocketPath(f), Token: []byte(f.Socket.Token)},
		Local:    eng,
		Fallback: fallback,
	}, nil
}
