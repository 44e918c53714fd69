package cli

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/explain"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
)

func init() { register("run", newRunCmd) }

// newRunCmd is `exechost run`: one command through this machine's own
// policy, with no gateway, for scripts and for trying a policy out. It
// prints the command's output and exits with its exit code.
func newRunCmd(g *globals) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [--agent ID] [--cwd D] [--timeout SEC] [--json] 'COMMAND TEXT' | WORD…",
		Short: "Run a command on this machine through its local approvals policy",
		Long: "Run analyses the command, applies this machine's exec-approvals.json, asks the\n" +
			"approver (exechost approver) when the policy says so — or applies askFallback\n" +
			"when none answers — and only then runs it. Exit status: the command's own;\n" +
			"126 denied (what was missing, which policy decided and the fixing command go\n" +
			"to stderr), 124 timed out, 2 usage, 1 any other failure. With --json, stdout\n" +
			"carries exactly one JSON object: the result, or the error.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			text, err := commandText(args) // as exec reads them
			if err != nil {
				return err
			}
			// With --json, an error that printed nothing is printed as
			// the one JSON object by run (root.go).
			return g.runLocal(cmd, f, text)
		},
	}
	// As for exec: everything from the command's first word on belongs
	// to the command (`exechost run ls -la`).
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().StringVar(&f.agent, "agent", defaultAgent, "agent `ID` whose approvals apply (as for exec and mcp)")
	cmd.Flags().StringVar(&f.cwd, "cwd", "", "working `DIR` (default: the current directory)")
	cmd.Flags().StringVar(&f.security, "security", "", "request a stricter security (`deny|allowlist|full`); the host's own file still applies")
	cmd.Flags().StringVar(&f.ask, "ask", "", "request more asking (`off|on-miss|always`)")
	cmd.Flags().IntVar(&f.timeout, "timeout", 0, "command timeout in seconds (kills the process group; default 1800)")
	cmd.Flags().BoolVar(&f.pty, "pty", false, "run attached to a pseudo-terminal")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print exactly one JSON object: the result or the error")
	return cmd
}

// runFlags are `exechost run`'s flags.
type runFlags struct {
	agent, cwd, security, ask string
	timeout                   int
	pty, asJSON               bool
}

// runLocal is `exechost run` without the --json error wrapping.
func (g *globals) runLocal(cmd *cobra.Command, f runFlags, text string) error {
	agent, cwd, security, ask, timeout, pty := f.agent, f.cwd, f.security, f.ask, f.timeout, f.pty
	if timeout < 0 {
		return usagef("--timeout cannot be negative")
	}
	if cwd == "" {
		// A local command runs where the user is, as a shell would.
		wd, err := os.Getwd()
		if err != nil {
			return hint.Wrap(fmt.Errorf("current directory: %w", err), "pass --cwd")
		}
		cwd = wd
	}
	req := host.Request{RawCommand: text, Cwd: cwd, AgentID: agent, PTY: pty}
	if security != "" {
		s, err := policy.ParseSecurity(security)
		if err != nil {
			return usagef("--security: %w", err)
		}
		req.Security = s
	}
	if ask != "" {
		a, err := policy.ParseAsk(ask)
		if err != nil {
			return usagef("--ask: %w", err)
		}
		req.Ask = a
	}
	// The same default as exec (the gateway's): a forgotten command
	// never runs unbounded.
	req.TimeoutMs = bridge.DefaultExecTimeout.Milliseconds()
	if timeout > 0 {
		req.TimeoutMs = (time.Duration(timeout) * time.Second).Milliseconds()
	}
	dir, err := g.dir()
	if err != nil {
		return err
	}
	e, err := g.localEngine(dir)
	if err != nil {
		return err
	}
	defer e.Close()
	if e.Prompter != nil {
		e.Prompter = progressPrompter{inner: e.Prompter, w: g.stderr}
	}
	res, err := e.Run(cmd.Context(), req)
	if err != nil {
		if de, ok := errors.AsType[*host.DenialError](err); ok {
			d := de.Denial
			h := explain.Host{Name: "this machine", Agent: agent, Requested: req.Security}
			s := approvals.NewStore(dir)
			h.Path = s.Path
			h.File, _ = s.Load()
			if d.Reason == explain.ReasonDisabled && req.Security == policy.SecurityDeny {
				// This very command line asked for deny; explain's hint
				// for a requested deny is about the gateway's config.
				d.Hint = "this run asked for it with --security deny: run it without --security (this machine's exec-approvals.json then decides) or with --security allowlist"
			}
			explain.Complete(&d, h)
			if d.Policy != nil && d.Policy.Level == "request" {
				d.Policy.Level = "--security on this command line"
			}
			if f.asJSON {
				return withCode(ExitDenied, &bridge.Error{Code: bridge.CodeDenied, Message: err.Error(), Denial: &d})
			}
			return g.denied(err.Error(), &d)
		}
		return err
	}
	if f.asJSON {
		out := resultJSON{OK: true, ExecResult: bridge.ExecResult{Status: bridge.ExecCompleted, Host: hostLocal, SystemRunResult: res.Wire()}}
		if err := g.printJSON(out); err != nil {
			return err
		}
	} else {
		fmt.Fprint(g.stdout, res.Stdout)
		fmt.Fprint(g.stderr, res.Stderr)
		if res.Truncated {
			g.truncationNote(res.DroppedBytes)
		}
		if res.TimedOut {
			fmt.Fprintf(g.stderr, "exechost: timed out; its process group was killed\n")
		}
	}
	switch {
	case res.TimedOut:
		return exitError{ExitTimeout}
	case res.ExitCode < 0:
		return exitError{ExitFailure}
	case res.ExitCode != 0:
		return exitError{res.ExitCode}
	}
	return nil
}

// msTime formats a unix-millisecond timestamp for humans.
func msTime(ms int64) string {
	return time.UnixMilli(ms).Local().Format("2006-01-02 15:04:05")
}
