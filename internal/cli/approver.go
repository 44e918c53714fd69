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
	"github.com/exechost/exechost/internal/approverui/web"
	"github.com/exechost/exechost/internal/asksock"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
)

func init() { register("approver", newApproverCmd) }

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
			err := runApprover(cmd.Context(), g, approverFlags{In: cmd.InOrStdin(), Web: webAddr, TUI: useTUI, Auto: decision, ExecHost: execHost})
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

// approverFlags is what `exechost approver` (and `exechost up`, which runs
// one) asks of the approver daemon.
type approverFlags struct {
	// In is the line mode's input.
	In io.Reader
	// Web, when set, also serves the web UI on this loopback address.
	Web string
	// TUI answers in the terminal UI instead of the line mode.
	TUI bool
	// Auto answers every prompt with this decision (no human).
	Auto policy.Approval
	// ExecHost also serves forwarded system.run (approver.Options.ExecHost).
	ExecHost bool
}

// approverUI is one row of approverUIs: a UI the flags can ask for.
type approverUI struct {
	name string
	// wanted reports whether the flags ask for this UI.
	wanted func(f approverFlags) bool
	// answer, for the UI that answers the queue (exactly one is chosen:
	// the first wanted row that has one), builds it.
	answer func(f approverFlags) approverui.UI
	// beside, for a UI that serves beside the one that answers, returns
	// approver.Options.Web for it.
	beside func(f approverFlags, stateDir string) func(ctx context.Context, q *prompt.Broker) (string, error)
}

// approverUIs are the approver's UIs, in order of precedence among those
// that answer; the last always matches. A new UI is one more row (see
// CONTRIBUTING.md, "Adding an approver UI").
var approverUIs = []approverUI{
	{name: "auto-decide", wanted: func(f approverFlags) bool { return f.Auto != "" },
		answer: func(f approverFlags) approverui.UI { return approverui.Auto{Decision: f.Auto, By: byAuto} }},
	{name: "tui", wanted: func(f approverFlags) bool { return f.TUI },
		answer: func(approverFlags) approverui.UI { return tui.UI{} }},
	// The web UI's logger is off: with --tui the terminal belongs to the
	// TUI, and every decision already reaches the host's audit log.
	{name: "web", wanted: func(f approverFlags) bool { return f.Web != "" },
		beside: func(f approverFlags, dir string) func(context.Context, *prompt.Broker) (string, error) {
			return func(ctx context.Context, q *prompt.Broker) (string, error) {
				url, err := web.Start(ctx, web.Options{Addr: f.Web, Broker: q, StateDir: dir})
				if err != nil {
					return "", fmt.Errorf("approver --web %s: %w", f.Web, err)
				}
				return url, nil
			}
		}},
	{name: "lines", wanted: func(approverFlags) bool { return true },
		answer: func(approverFlags) approverui.UI { return approverui.Lines{By: byLines} }},
}

// approverOptions picks the UIs the flags ask for from approverUIs.
func approverOptions(f approverFlags, stateDir string) (approver.Options, error) {
	opts := approver.Options{StateDir: stateDir, ExecHost: f.ExecHost, Notify: f.Auto == "", In: f.In}
	for _, u := range approverUIs {
		if !u.wanted(f) {
			continue
		}
		if u.answer != nil && opts.UI == nil {
			opts.UI = u.answer(f)
		}
		if u.beside != nil {
			if opts.Web != nil {
				return opts, fmt.Errorf("approver: two UIs (%s and another) serve beside the answering one; approver.Options holds one", u.name)
			}
			opts.Web = u.beside(f, stateDir)
		}
	}
	if opts.UI == nil {
		return opts, errors.New("approver: no UI answers the queue (approverUIs lacks its catch-all row)")
	}
	return opts, nil
}

// runApprover turns the flags into approver.Options and runs the daemon
// until SIGINT or SIGTERM.
func runApprover(parent context.Context, g *globals, f approverFlags) error {
	if parent == nil {
		parent = context.Background()
	}
	dir, err := g.dir()
	if err != nil {
		return err
	}
	opts, err := approverOptions(f, dir)
	if err != nil {
		return err
	}
	opts.OnWebURL, opts.Out, opts.Err = g.onWebURL, g.stdout, g.stderr
	if f.ExecHost {
		rec := g.auditRecorder(dir)
		defer rec.Close()
		opts.Audit = rec
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return approver.Run(ctx, opts)
}
