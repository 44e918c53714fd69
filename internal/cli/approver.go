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

	"github.com/exechost/exechost/internal/approver"
	"github.com/exechost/exechost/internal/approverui"
	"github.com/exechost/exechost/internal/approverui/tui"
	"github.com/exechost/exechost/internal/asksock"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
)

func init() { register("approver", newApproverCmd) }

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
			err := runApproverWith(cmd.Context(), g, cmd.InOrStdin(), webAddr, useTUI, decision, execHost)
			if errors.Is(err, asksock.ErrAlreadyRunning) {
				// The common case is `exechost up`, which runs one: its
				// prompts are in its terminal and web page already.
				err = hint.Wrap(err, "if it is `exechost up`'s approver, answer there (its terminal or web page), or restart it as `exechost up --no-approver` and run this approver beside it; otherwise stop the other approver, or use another --state-dir")
			}
			return err
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

// runApproverWith turns the flags into approver.Options and runs the
// daemon until SIGINT or SIGTERM; execHost also serves forwarded
// system.run.
func runApproverWith(parent context.Context, g *globals, stdin io.Reader, webAddr string, useTUI bool, auto policy.Approval, execHost bool) error {
	if parent == nil {
		parent = context.Background()
	}
	dir, err := g.dir()
	if err != nil {
		return err
	}
	opts := approver.Options{
		StateDir: dir, ExecHost: execHost, Notify: auto == "", OnWebURL: g.onWebURL,
		In: stdin, Out: g.stdout, Err: g.stderr,
	}
	// The UIs, one per flag: a new UI is one more case here.
	switch {
	case auto != "":
		opts.UI = approverui.Auto{Decision: auto, By: byAuto}
	case useTUI:
		opts.UI = tui.UI{}
	default:
		opts.UI = approverui.Lines{By: byLines}
	}
	if webAddr != "" {
		if startWeb == nil {
			return hint.Wrap(errors.New("approver --web: web UI not built yet"), "run without --web, or use --tui")
		}
		opts.Web = func(ctx context.Context, q *prompt.Broker) (string, error) {
			url, err := startWeb(ctx, webAddr, q, dir)
			if err != nil {
				return "", fmt.Errorf("approver --web %s: %w", webAddr, err)
			}
			return url, nil
		}
	}
	if execHost {
		rec := g.auditRecorder(dir)
		defer rec.Close()
		opts.Audit = rec
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return approver.Run(ctx, opts)
}
