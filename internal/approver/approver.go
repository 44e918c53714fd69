// Package approver is the approver daemon (`exechost approver`): it hosts
// the approval socket (asksock) over one prompt queue (prompt.Broker),
// starts the UI that answers it (approverui), optionally the web UI and
// desktop notifications, and with ExecHost runs forwarded system.run
// through host engines. Run assembles it, like gateway.Run and node.Run;
// internal/cli keeps the flags.
package approver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/approverui"
	"github.com/exechost/exechost/internal/asksock"
	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/state"
)

// Options is everything the approver daemon needs; Run builds it.
type Options struct {
	// StateDir holds exec-approvals.json (created, with its socket token,
	// on first use) and the socket the approver listens on.
	StateDir string
	// UI shows and answers the prompts (approverui.Lines, approverui.Auto,
	// tui.UI, …). The approver stops when it returns. Required.
	UI approverui.UI
	// Web, when set, serves a second UI on the queue until ctx is done
	// and returns its URL (with its per-run secret); it starts before UI,
	// whose banner shows the URL.
	Web func(ctx context.Context, q *prompt.Broker) (url string, err error)
	// OnWebURL hears the web UI's URL (`exechost up` prints it).
	OnWebURL func(url string)
	// Notify shows a desktop notification for every new prompt
	// (approverui.NotifyDesktop); off when a UI answers by itself.
	Notify bool
	// ExecHost also runs system.run forwarded by a node runner started
	// with --exec-host app, through host engines over StateDir's
	// approvals, prompting in this queue (EngineExecutor).
	ExecHost bool
	// Audit receives the exec host's records; nil records nothing.
	Audit *audit.Recorder
	// In, Out and Err are the approver's terminal; nil discards (In:
	// reads nothing).
	In       io.Reader
	Out, Err io.Writer
}

// Run serves the approval socket and opts.UI until ctx is done, the UI
// returns or the socket server fails. A live approver already on the
// socket is an error wrapping asksock.ErrAlreadyRunning.
func Run(ctx context.Context, opts Options) error {
	if opts.UI == nil {
		return hint.Wrap(errors.New("approver: no UI"), "internal/cli picks one from the flags")
	}
	if opts.In == nil {
		opts.In = strings.NewReader("")
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Err == nil {
		opts.Err = io.Discard
	}
	if err := state.Ensure(opts.StateDir); err != nil {
		return err
	}
	store := approvals.NewStore(opts.StateDir)
	f, err := store.Ensure()
	if err != nil {
		return fmt.Errorf("approver: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	ownsTerminal := approverui.OwnsTerminal(opts.UI)
	b := prompt.NewBroker()
	srv := &asksock.Server{Path: store.SocketPath(f), Token: []byte(f.Socket.Token), Broker: b}
	if !ownsTerminal {
		srv.Logf = func(format string, args ...any) { fmt.Fprintf(opts.Err, format+"\n", args...) }
	}
	if opts.ExecHost {
		srv.Exec = NewEngineExecutor(host.Options{
			StateDir: opts.StateDir, Audit: opts.Audit,
			Warn: func(err error) { fmt.Fprintf(opts.Err, "exechost: WARNING: %v\n", err) },
		}, b)
	}
	if err := srv.Listen(); err != nil {
		return fmt.Errorf("approver: %w", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	defer func() {
		cancel()
		<-served
	}()

	banner := ""
	if opts.Web != nil {
		url, err := opts.Web(ctx, b)
		if err != nil {
			return err
		}
		banner = "web UI: " + url
		if opts.OnWebURL != nil {
			opts.OnWebURL(url)
		}
		if !ownsTerminal {
			fmt.Fprintln(opts.Out, banner)
		}
	}
	if opts.Notify {
		go approverui.NotifyDesktop(ctx, b)
	}
	fmt.Fprintf(opts.Err, "approver: listening on %s (pid %d)\n", srv.Path, os.Getpid())
	if opts.ExecHost {
		fmt.Fprintf(opts.Err, "approver: exec host: forwarded system.run runs in this session (%s)\n", SessionSummary())
	}

	go func() {
		env := approverui.Env{Queue: b, Title: srv.Path, Banner: banner, In: opts.In, Out: opts.Out, Err: opts.Err}
		if err := opts.UI.Serve(ctx, env); err != nil {
			fmt.Fprintln(opts.Err, "approver:", err)
		}
		cancel() // quitting the UI (the TUI's q) stops the approver
	}()

	select {
	case err := <-served:
		served <- err // for the deferred wait
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("approver: %w", err)
		}
	case <-ctx.Done():
	}
	return nil
}

// SessionSummary names the session variables forwarded commands will see,
// so the user can tell at start-up whether this is the desktop session.
func SessionSummary() string {
	var parts []string
	for _, name := range asksock.SessionEnv() {
		if v, ok := os.LookupEnv(name); ok && v != "" {
			parts = append(parts, name+"="+v)
		}
	}
	if len(parts) == 0 {
		return "no DISPLAY, WAYLAND_DISPLAY or session bus: desktop commands will fail"
	}
	return strings.Join(parts, " ")
}
