package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/approverui"
	"github.com/exechost/exechost/internal/approverui/tui"
	"github.com/exechost/exechost/internal/asksock"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/state"
)

func init() { register(newApproverCmd) }

// startWeb is the hook for `exechost approver --web ADDR`. The web UI
// (internal/approverui/web) sets it from its own file in this package
// (internal/cli/approver_web.go: `func init() { startWeb = web.Start }`) so
// this command does not depend on it. It serves the web UI for b on addr
// until ctx is done and returns the URL to print (with its per-run
// secret). While nil, --web fails with "web UI not built yet".
var startWeb func(ctx context.Context, addr string, b *prompt.Broker, stateDir string) (url string, err error)

// Names the approver's UIs give themselves in decisions.
const (
	byLines = "approver lines"
	byAuto  = "approver auto-decide"
)

func newApproverCmd(g *globals) *cobra.Command {
	var (
		webAddr  string
		useTUI   bool
		auto     string
		execHost bool
	)
	cmd := &cobra.Command{
		Use:   "approver",
		Short: "Host the approval socket and answer execution hosts' prompts",
		Long: `Host the approval socket (<state>/exec-approvals.sock) and answer the
prompts execution hosts send when a command needs a human.

Without --tui, each prompt is printed to stdout ("PENDING <id>" and its
details) and answers are read from stdin as lines "ID allow-once",
"ID allow-always" or "ID deny" (ID may be a unique prefix; "list" reprints
the queue). --tui shows a terminal UI instead; --web ADDR serves the web UI
on a loopback address as well. --auto-decide answers every prompt itself,
for scripted environments and tests.

--exec-host also makes the approver the exec host of a node runner started
with --exec-host app: the node forwards each system.run over the socket,
and the approver applies this state directory's exec-approvals.json
(prompting here when needed) and runs the command in this session, with
this session's DISPLAY, WAYLAND_DISPLAY, DBUS_SESSION_BUS_ADDRESS and
XDG_RUNTIME_DIR (see docs/approver-exec-host.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var decision policy.Approval
			switch auto {
			case "":
			case string(policy.AllowOnce), string(policy.Reject):
				decision = policy.Approval(auto)
			default:
				return usagef("--auto-decide %q: want allow-once or deny (allow-always is never automatic)", auto)
			}
			if useTUI && decision != "" {
				return usagef("--tui and --auto-decide exclude each other")
			}
			return runApproverWith(cmd.Context(), g, cmd.InOrStdin(), webAddr, useTUI, decision, execHost)
		},
	}
	cmd.Flags().StringVar(&webAddr, "web", "", "also serve the web UI on this loopback address (e.g. 127.0.0.1:0)")
	cmd.Flags().BoolVar(&useTUI, "tui", false, "show a terminal UI instead of the line mode")
	cmd.Flags().StringVar(&auto, "auto-decide", "", "answer every prompt with allow-once or deny (scripts and tests)")
	cmd.Flags().BoolVar(&execHost, "exec-host", false, "also run system.run forwarded by a node (\"node run --exec-host app\") in this session")
	return cmd
}

func runApprover(parent context.Context, g *globals, stdin io.Reader, webAddr string, useTUI bool, auto policy.Approval) error {
	return runApproverWith(parent, g, stdin, webAddr, useTUI, auto, false)
}

// runApproverWith is runApprover; execHost also serves forwarded
// system.run (approver_exec.go).
func runApproverWith(parent context.Context, g *globals, stdin io.Reader, webAddr string, useTUI bool, auto policy.Approval, execHost bool) error {
	if parent == nil {
		parent = context.Background()
	}
	dir, err := g.dir()
	if err != nil {
		return err
	}
	if err := state.Ensure(dir); err != nil {
		return err
	}
	store := approvals.NewStore(dir)
	f, err := store.Ensure()
	if err != nil {
		return fmt.Errorf("approver: %w", err)
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	b := prompt.NewBroker()
	srv := &asksock.Server{Path: store.SocketPath(f), Token: []byte(f.Socket.Token), Broker: b}
	if !useTUI {
		srv.Logf = func(format string, args ...any) { fmt.Fprintf(g.stderr, format+"\n", args...) }
	}
	if execHost {
		enableReaper(g)
	}
	if execHost {
		srv.Exec = g.approverExecutor(dir, b)
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
	if webAddr != "" {
		if startWeb == nil {
			return fmt.Errorf("approver --web: web UI not built yet (hint: run without --web, or use --tui)")
		}
		url, err := startWeb(ctx, webAddr, b, dir)
		if err != nil {
			return fmt.Errorf("approver --web %s: %w", webAddr, err)
		}
		banner = "web UI: " + url
		if g.onWebURL != nil {
			g.onWebURL(url) // `exechost up` prints it in its summary
		}
		if !useTUI {
			fmt.Fprintln(g.stdout, banner)
		}
	}
	if auto != "" {
		fmt.Fprintf(g.stderr, "WARNING: auto-deciding %s for every prompt (no human is asked)\n", auto)
	} else {
		go approverui.NotifyDesktop(ctx, b)
	}
	fmt.Fprintf(g.stderr, "approver: listening on %s (pid %d)\n", srv.Path, os.Getpid())
	if execHost {
		fmt.Fprintf(g.stderr, "approver: exec host: forwarded system.run runs in this session (%s)\n", sessionSummary())
	}

	switch {
	case auto != "":
		go approverui.AutoDecide(ctx, b, auto, byAuto)
	case useTUI:
		go func() {
			if err := tui.Run(ctx, b, tui.Options{Title: srv.Path, Banner: banner}); err != nil {
				fmt.Fprintln(g.stderr, "approver:", err)
			}
			cancel() // quitting the TUI stops the approver
		}()
	default:
		go approverui.RunLines(ctx, b, stdin, g.stdout, byLines)
	}

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
