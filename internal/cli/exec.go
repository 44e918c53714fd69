package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/gateway"
)

func init() { register(newExecCmd) }

// execFlags are `exechost exec`'s flags.
type execFlags struct {
	url, session, agent            string
	host, security, ask, node, cwd string
	env                            []string
	timeout, yieldMs               int
	asJSON                         bool
	status, slash, idem            string
	events                         bool
}

func newExecCmd(g *globals) *cobra.Command {
	var f execFlags
	cmd := &cobra.Command{
		Use:   "exec [flags] 'COMMAND TEXT'",
		Short: "Run a command through the gateway as an agent's exec tool call would",
		Long: `Run a command through the gateway: the host (sandbox, gateway or node),
security, ask and node resolve as tool param (these flags) → session override
(/exec, /elevated) → agent config → global config → defaults, and the
execution host's own exec-approvals.json has the last word.

The exit status is the command's own; a denial or failure exits 1 with the
reason on stderr. Queued system events of the session are printed to stderr
(or included with --json).

  exechost exec --host node --node build-box 'make test'
  exechost exec --yield-ms 1000 'sleep 5; echo done'   # returns a runId
  exechost exec --status RUNID
  exechost exec --events                             # drain the session's events
  exechost exec --session-command '/elevated on'`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.runExec(cmd.Context(), f, args)
		},
	}
	fl := cmd.Flags()
	// Everything after the command's first word belongs to the command:
	// `exechost exec --host node ls -la` runs "ls -la".
	fl.SetInterspersed(false)
	fl.StringVar(&f.url, "gateway", DefaultGateway, "gateway URL")
	fl.StringVar(&f.session, "session", "", "session key (default main)")
	fl.StringVar(&f.agent, "agent", "", "agent id (default main)")
	fl.StringVar(&f.host, "host", "", "execution host: sandbox, gateway or node")
	fl.StringVar(&f.security, "security", "", "requested security: deny, allowlist or full")
	fl.StringVar(&f.ask, "ask", "", "requested ask mode: off, on-miss or always")
	fl.StringVar(&f.node, "node", "", "node id, display name, remote IP or id prefix (host=node)")
	fl.StringVar(&f.cwd, "cwd", "", "working directory on the execution host")
	fl.StringArrayVar(&f.env, "env", nil, "NAME=VALUE added to the command's environment (repeatable)")
	fl.IntVar(&f.timeout, "timeout", 0, "command timeout in seconds (default 1800)")
	fl.IntVar(&f.yieldMs, "yield-ms", 0, "return {status: running, runId} if the command is still going after this many ms")
	fl.BoolVar(&f.asJSON, "json", false, "print the result as JSON")
	fl.StringVar(&f.idem, "idempotency-key", "", "retrying with the same key never runs the command twice on a node")
	fl.StringVar(&f.status, "status", "", "show the state of a background run instead of running a command")
	fl.BoolVar(&f.events, "events", false, "print and drain the session's queued system events instead of running a command")
	fl.StringVar(&f.slash, "session-command", "", "run a slash command (/exec …, /elevated …) for the session instead of a command")
	return cmd
}

func (g *globals) runExec(ctx context.Context, f execFlags, args []string) error {
	modes := 0
	for _, on := range []bool{f.status != "", f.events, f.slash != "", len(args) > 0} {
		if on {
			modes++
		}
	}
	if modes != 1 {
		return usagef("exec needs exactly one of: 'COMMAND TEXT', --status RUNID, --events, --session-command TEXT")
	}
	env := map[string]string{}
	for _, kv := range f.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usagef("--env %q: want NAME=VALUE", kv)
		}
		env[k] = v
	}
	c, err := g.dialGateway(ctx, f.url, bridge.RoleAgent)
	if err != nil {
		return err
	}
	defer c.Close("done")
	short, cancel := context.WithTimeout(ctx, clientTimeout)
	defer cancel()
	sess := bridge.SessionParams{SessionKey: f.session, AgentID: f.agent}
	switch {
	case f.status != "":
		var res bridge.ExecStatusResult
		if err := c.Call(short, bridge.MethodExecStatus, bridge.ExecStatusParams{RunID: f.status, AgentID: f.agent, SessionKey: f.session}, &res); err != nil {
			return err
		}
		if f.asJSON {
			return g.printJSON(res)
		}
		fmt.Fprintf(g.stdout, "run %s: %s\n", res.RunID, res.Status)
		if res.Error != nil {
			fmt.Fprintf(g.stdout, "error: %s\n", res.Error.Message)
		}
		if res.Result != nil {
			fmt.Fprintf(g.stdout, "exit code: %d\n", res.Result.ExitCode)
			fmt.Fprint(g.stdout, res.Result.Stdout)
			fmt.Fprint(g.stderr, res.Result.Stderr)
		}
		return nil
	case f.events:
		var res bridge.SessionEventsResult
		if err := c.Call(short, bridge.MethodSessionEvents, sess, &res); err != nil {
			return err
		}
		if f.asJSON {
			return g.printJSON(res)
		}
		for _, e := range res.Events {
			fmt.Fprintln(g.stdout, e.Text)
		}
		return nil
	case f.slash != "":
		var res bridge.SessionCommandResult
		err := c.Call(short, bridge.MethodSessionCommand, bridge.SessionCommandParams{SessionKey: f.session, AgentID: f.agent, Text: f.slash}, &res)
		if err != nil {
			return err
		}
		if f.asJSON {
			return g.printJSON(res)
		}
		fmt.Fprintln(g.stdout, res.Reply)
		return nil
	}
	p := bridge.ExecParams{
		Command: strings.Join(args, " "), Host: f.host, Security: f.security, Ask: f.ask, Node: f.node,
		Cwd: f.cwd, TimeoutSec: f.timeout, SessionKey: f.session, AgentID: f.agent, YieldMs: f.yieldMs,
		IdempotencyKey: f.idem,
	}
	if len(env) > 0 {
		p.Env = env
	}
	timeout := gateway.DefaultTimeout
	if f.timeout > 0 {
		timeout = time.Duration(f.timeout) * time.Second
	}
	cctx, ccancel := context.WithTimeout(ctx, timeout+2*gateway.InvokeMargin)
	defer ccancel()
	var res bridge.ExecResult
	stop := startProgress(g.stderr, "waiting for the gateway (the command runs, or an approval is pending)")
	err = c.Call(cctx, bridge.MethodExec, p, &res)
	stop()
	if err != nil {
		var be *bridge.Error
		if errors.As(err, &be) && be.Code == bridge.CodeDenied {
			return fmt.Errorf("denied: %s", be.Message)
		}
		return err
	}
	if f.asJSON {
		if err := g.printJSON(res); err != nil {
			return err
		}
	} else {
		for _, e := range res.Events {
			// The first line; a finished event's output tail repeats
			// what is printed below (--json has it all).
			line, _, _ := strings.Cut(e.Text, "\n")
			fmt.Fprintf(g.stderr, "[event] %s\n", line)
		}
		if res.Status == bridge.ExecRunning {
			fmt.Fprintf(g.stdout, "running in the background: %s (hint: exechost exec --status %s)\n", res.RunID, res.RunID)
			return nil
		}
		fmt.Fprint(g.stdout, res.Stdout)
		fmt.Fprint(g.stderr, res.Stderr)
		if res.TimedOut {
			fmt.Fprintf(g.stderr, "exechost: command timed out\n")
		}
		if res.Error != "" {
			fmt.Fprintf(g.stderr, "exechost: %s\n", res.Error)
		}
	}
	if res.Status == bridge.ExecCompleted && res.ExitCode != 0 {
		return exitError{code: res.ExitCode}
	}
	return nil
}
