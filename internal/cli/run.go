package cli

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
)

func init() { register(newRunCmd) }

// newRunCmd is `exechost run`: one command through this machine's own
// policy, with no gateway, for scripts and for trying a policy out. It
// prints the command's output and exits with its exit code.
func newRunCmd(g *globals) *cobra.Command {
	var agent, cwd, security, ask string
	var timeout float64
	var pty bool
	cmd := &cobra.Command{
		Use:   "run [--agent ID] [--cwd D] [--timeout SEC] 'COMMAND TEXT'",
		Short: "Run a command on this machine through its local approvals policy",
		Long: "Run analyses the command, applies this machine's exec-approvals.json, asks the\n" +
			"approver (exechost approver) when the policy says so — or applies askFallback\n" +
			"when none answers — and only then runs it. Exit status: the command's own, or\n" +
			"126 when it was denied.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cwd == "" {
				// A local command runs where the user is, as a shell would.
				wd, err := os.Getwd()
				if err != nil {
					return fmt.Errorf("current directory: %w (hint: pass --cwd)", err)
				}
				cwd = wd
			}
			req := host.Request{RawCommand: args[0], Cwd: cwd, AgentID: agent, PTY: pty}
			if security != "" {
				s, err := policy.ParseSecurity(security)
				if err != nil {
					return usageError{err}
				}
				req.Security = s
			}
			if ask != "" {
				a, err := policy.ParseAsk(ask)
				if err != nil {
					return usageError{err}
				}
				req.Ask = a
			}
			if timeout > 0 {
				req.TimeoutMs = int64(timeout * float64(time.Second/time.Millisecond))
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
				if isDenial(err) {
					fmt.Fprintln(g.stderr, "exechost: denied:", err)
					return exitError{126}
				}
				return err
			}
			fmt.Fprint(g.stdout, res.Stdout)
			fmt.Fprint(g.stderr, res.Stderr)
			if res.TimedOut {
				fmt.Fprintf(g.stderr, "exechost: timed out after %gs; process group killed\n", timeout)
				return exitError{124}
			}
			if res.ExitCode != 0 {
				return exitError{res.ExitCode}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "agent id whose approvals apply")
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory (default: the current directory)")
	cmd.Flags().StringVar(&security, "security", "", "request a stricter security (deny|allowlist|full); the host's own file still applies")
	cmd.Flags().StringVar(&ask, "ask", "", "request more asking (off|on-miss|always)")
	cmd.Flags().Float64Var(&timeout, "timeout", 0, "timeout in seconds (kills the process group)")
	cmd.Flags().BoolVar(&pty, "pty", false, "run attached to a pseudo-terminal")
	return cmd
}

// isDenial reports whether err is a policy denial rather than a failure.
func isDenial(err error) bool {
	return errors.Is(err, policy.ErrDisabled) || errors.Is(err, policy.ErrAllowlistMiss) ||
		errors.Is(err, policy.ErrApprovalRequired) || errors.Is(err, policy.ErrUserDenied)
}

// msTime formats a unix-millisecond timestamp for humans.
func msTime(ms int64) string {
	return time.UnixMilli(ms).Local().Format("2006-01-02 15:04:05")
}
