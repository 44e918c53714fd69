package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/exechost/exechost/internal/asksock"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/runner"
)

// Values of the node's execHost and execFallback settings (`exechost node
// run --exec-host app|local --exec-fallback local|deny`).
const (
	// ExecHostLocal runs system.run in the node runner (the default).
	ExecHostLocal = "local"
	// ExecHostApp forwards system.run to the approver (`exechost approver
	// --exec-host`) so it runs in the user's desktop session.
	ExecHostApp = "app"
	// FallbackLocal runs a command in the node runner when the approver
	// is unreachable, and says so in the result (the default).
	FallbackLocal = "local"
	// FallbackDeny refuses a command when the approver is unreachable.
	FallbackDeny = "deny"
)

// ErrCompanionUnavailable is the error of a command refused because the
// approver exec host was unreachable and execFallback is deny; the
// Forwarder marks it bridge.Unavailable (UNAVAILABLE on the wire).
var ErrCompanionUnavailable = errors.New("COMPANION_APP_UNAVAILABLE: approver exec host unreachable")

// ErrForward wraps a failure after the command was handed to the approver
// (its connection was lost, the result never came or did not verify): the
// command may have run there, so it is neither retried nor run locally.
var ErrForward = errors.New("forwarded system.run failed")

// fallbackNote starts the stderr of a command that execFallback=local ran
// in the node runner, so the agent and the human know where it ran.
const fallbackNote = "exechost: approver exec host unreachable; ran in the node runner instead (execFallback=local)"

// ParseExecHost parses an execHost setting; "" means local.
func ParseExecHost(s string) (string, error) {
	switch s {
	case "", ExecHostLocal:
		return ExecHostLocal, nil
	case ExecHostApp:
		return ExecHostApp, nil
	}
	return "", fmt.Errorf("%w: execHost %q (accepted: app, local)", policy.ErrInvalidValue, s)
}

// ParseExecFallback parses an execFallback setting; "" means local.
func ParseExecFallback(s string) (string, error) {
	switch s {
	case "", FallbackLocal:
		return FallbackLocal, nil
	case FallbackDeny:
		return FallbackDeny, nil
	}
	return "", fmt.Errorf("%w: execFallback %q (accepted: local, deny)", policy.ErrInvalidValue, s)
}

// Forwarder is the Executor of a node whose execHost is app: it forwards
// each system.run to the approver over the approval socket and returns the
// approver's verified result, emitting the same lifecycle events a local
// run would. When the approver is unreachable (nothing ran there), Fallback
// decides: local runs the command through Local, deny refuses it with
// ErrCompanionUnavailable and an exec.denied event.
type Forwarder struct {
	// Client reaches the approver.
	Client *asksock.ExecClient
	// Local is the node's own engine, for execFallback local.
	Local Executor
	// Fallback is FallbackLocal or FallbackDeny; anything else denies.
	Fallback string
	// NodeID names this node in forwarded requests and events.
	NodeID func() string
	// OnEvent receives lifecycle events of forwarded and denied runs
	// (wire it to Client.HostEvent, like the local engine's OnEvent).
	OnEvent func(bridge.ExecEvent)
	// Logger receives one line per fallback; nil discards.
	Logger *slog.Logger
}

// Run implements Executor.
func (f *Forwarder) Run(ctx context.Context, req host.Request) (host.Result, error) {
	if req.RunID == "" {
		req.RunID = uuid.NewString()
	}
	nid := ""
	if f.NodeID != nil {
		nid = f.NodeID()
	}
	ev := bridge.ExecEvent{RunID: req.RunID, SessionKey: req.SessionKey, AgentID: req.AgentID, NodeID: nid, Host: string(policy.HostNode), Command: commandText(req)}

	var (
		res bridge.SystemRunResult
		err = fmt.Errorf("%w: no exec client configured", prompt.ErrUnreachable)
	)
	if f.Client != nil {
		res, err = f.Client.Exec(ctx, req.Wire(nid))
	}
	var be *bridge.Error
	switch {
	case err == nil:
		f.emit(ev, bridge.EventExecStarted)
		fin := ev
		code := res.ExitCode
		fin.ExitCode, fin.TimedOut, fin.Tail = &code, res.TimedOut, tail(res.Stdout, res.Stderr)
		f.emit(fin, bridge.EventExecFinished)
		return host.Result{Result: host.FromWire(res)}, nil
	case errors.As(err, &be):
		// The approver decided; its answer (the bridge.Error it mapped with
		// bridge.AsError, as a local run would have) stands, whatever
		// Fallback says, and travels to the gateway unchanged.
		if be.Code == bridge.CodeDenied {
			d := ev
			d.Reason = be.Message
			f.emit(d, bridge.EventExecDenied)
		}
		return failed(be), be
	case !asksock.ExecNotRun(err):
		rerr := fmt.Errorf("%w: %w", ErrForward, err)
		return failed(rerr), rerr
	}

	if f.Fallback != FallbackLocal || f.Local == nil {
		rerr := bridge.Unavailable(hint.Wrap(fmt.Errorf("%w (%v)", ErrCompanionUnavailable, err), "start `exechost approver --exec-host`, or run the node with --exec-fallback local"))
		// Nothing decided against the command: the host it goes to
		// cannot be reached, a failure, not a denial.
		d := ev
		d.Reason = rerr.Error()
		f.emit(d, bridge.EventExecFailed)
		return failed(rerr), rerr
	}
	f.logf("approver exec host unreachable; running in the node runner (execFallback=local)", "runId", req.RunID, "err", err)
	hr, lerr := f.Local.Run(ctx, req)
	if lerr != nil {
		lerr = fmt.Errorf("%w (approver exec host unreachable; execFallback=local applied this node's own policy)", lerr)
		hr.Error = lerr.Error()
		return hr, lerr
	}
	hr.Stderr = fallbackNote + "\n" + hr.Stderr
	return hr, nil
}

func (f *Forwarder) emit(ev bridge.ExecEvent, kind string) {
	if f.OnEvent != nil {
		ev.Kind = kind
		f.OnEvent(ev)
	}
}

func (f *Forwarder) logf(msg string, args ...any) {
	if f.Logger != nil {
		f.Logger.Warn(msg, args...)
	}
}

func failed(err error) host.Result {
	return host.Result{Result: runner.Result{ExitCode: -1, Error: err.Error()}}
}

// commandText is how events name a command.
func commandText(req host.Request) string {
	if req.RawCommand != "" {
		return req.RawCommand
	}
	return strings.Join(req.Argv, " ")
}

// tail returns the last runner.TailSize bytes of the combined output, cut
// at a UTF-8 boundary and marked when earlier output was dropped.
func tail(stdout, stderr string) string {
	s := stdout + stderr
	if len(s) <= runner.TailSize {
		return s
	}
	s = s[len(s)-runner.TailSize:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return "…" + s
}
