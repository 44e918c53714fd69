package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/shellcmd"
)

func init() { register("exec", newExecCmd) }

// execFlags are `exechost exec`'s flags.
type execFlags struct {
	url, session, agent            string
	host, security, ask, node, cwd string
	env                            []string
	timeout, yieldMs               int
	asJSON                         bool
	status, slash, idem            string
	events                         string
}

// --events values.
const (
	eventsRun   = "run"   // print this call's events with its result (default)
	eventsAll   = "all"   // print every queued event of the session with the result
	eventsDrain = "drain" // no command: print and drain the session's events
)

func newExecCmd(g *globals) *cobra.Command {
	var f execFlags
	cmd := &cobra.Command{
		Use:   "exec [flags] 'COMMAND TEXT'",
		Short: "Run a command through the gateway as an agent's exec tool call would",
		Long: `Run a command through the gateway: the host (sandbox, gateway or node),
security, ask and node resolve as tool param (these flags) → session override
(/exec, /elevated) → agent config → global config → defaults, and the
execution host's own exec-approvals.json has the last word.

Exit status: the command's own; 126 denied (what was missing, which policy
decided and the fixing command go to stderr), 124 timed out, 125 the gateway
or the target is unavailable, 2 usage, 1 any other failure. With --json,
stdout carries exactly one JSON object: the result, or the error with its
code, reason and hint. This call's system events are printed to stderr
(--events all: the session's other queued events too).

  exechost exec --host node --node build-box 'make test'
  exechost exec --yield-ms 1000 'sleep 5; echo done'   # returns a runId
  exechost exec --status RUNID
  exechost exec --events drain                       # print and drain the session's events
  exechost exec --session-command '/elevated on'`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.runExec(cmd.Context(), f, args)
		},
	}
	fl := cmd.Flags()
	// Everything after the command's first word belongs to the command:
	// `exechost exec --host node ls -la` runs "ls -la" (commandText).
	fl.SetInterspersed(false)
	fl.StringVar(&f.url, "gateway", DefaultGateway, "gateway URL")
	fl.StringVar(&f.session, "session", "", "session key (default main)")
	fl.StringVar(&f.agent, "agent", "", "agent id (default main)")
	fl.StringVar(&f.host, "host", "", "execution host: `sandbox|gateway|node`")
	fl.StringVar(&f.security, "security", "", "requested security: `deny|allowlist|full`")
	fl.StringVar(&f.ask, "ask", "", "requested ask mode: `off|on-miss|always`")
	fl.StringVar(&f.node, "node", "", "node id, display name, remote IP or id prefix (host=node)")
	fl.StringVar(&f.cwd, "cwd", "", "working directory on the execution host")
	fl.StringArrayVar(&f.env, "env", nil, "NAME=VALUE added to the command's environment (repeatable)")
	fl.IntVar(&f.timeout, "timeout", 0, "command timeout in seconds (default 1800)")
	fl.IntVar(&f.yieldMs, "yield-ms", 0, "return {status: running, runId} if the command is still going after this many milliseconds")
	fl.BoolVar(&f.asJSON, "json", false, "print exactly one JSON object on stdout: the result or the error")
	fl.StringVar(&f.idem, "idempotency-key", "", "retrying with the same key never runs the command twice on a node")
	fl.StringVar(&f.status, "status", "", "show the state of background run `RUNID` instead of running a command")
	fl.StringVar(&f.events, "events", eventsRun, "system events to print: `run|all|drain` (run: this call's; all: the session's queued ones too; drain: no command, print and drain them)")
	fl.StringVar(&f.slash, "session-command", "", "run a slash command (/exec …, /elevated …) for the session instead of a command")
	return cmd
}

// validate checks exec's flags before anything is dialled: every usage
// error exits 2 without touching the gateway.
func (f execFlags) validate(args []string) (map[string]string, error) {
	switch f.events {
	case eventsRun, eventsAll, eventsDrain:
	default:
		return nil, usagef("--events %q: want run, all or drain", f.events)
	}
	modes := 0
	for _, on := range []bool{f.status != "", f.events == eventsDrain, f.slash != "", len(args) > 0} {
		if on {
			modes++
		}
	}
	if modes != 1 {
		return nil, usagef("exec needs exactly one of: 'COMMAND TEXT', --status RUNID, --events drain, --session-command TEXT")
	}
	if f.host != "" {
		if _, err := policy.ParseHost(f.host); err != nil {
			return nil, usagef("--host: %w", err)
		}
	}
	if f.security != "" {
		if _, err := policy.ParseSecurity(f.security); err != nil {
			return nil, usagef("--security: %w", err)
		}
	}
	if f.ask != "" {
		if _, err := policy.ParseAsk(f.ask); err != nil {
			return nil, usagef("--ask: %w", err)
		}
	}
	if f.timeout < 0 || f.yieldMs < 0 {
		return nil, usagef("--timeout and --yield-ms cannot be negative")
	}
	env := map[string]string{}
	for _, kv := range f.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("--env %q: want NAME=VALUE", kv)
		}
		env[k] = v
	}
	return env, nil
}

// runExec runs exec once; with --json, an error that printed nothing is
// printed as the one JSON object by run (root.go).
func (g *globals) runExec(ctx context.Context, f execFlags, args []string) error {
	return g.execOnce(ctx, f, args)
}

func (g *globals) execOnce(ctx context.Context, f execFlags, args []string) error {
	env, err := f.validate(args)
	if err != nil {
		return err
	}
	role := bridge.RoleAgent
	if fs := strings.Fields(f.slash); len(fs) > 0 && strings.EqualFold(fs[0], "/elevated") && g.holdsOperator() {
		// /elevated needs an operator connection, which an agent
		// credential cannot open (/approve stays an agent's, refused).
		role = bridge.RoleOperator
	}
	c, err := g.dialGateway(ctx, f.url, role)
	if err != nil {
		return err
	}
	defer c.Close("done")
	short, cancel := context.WithTimeout(ctx, clientTimeout)
	defer cancel()
	sess := bridge.SessionParams{SessionKey: f.session, AgentID: f.agent}
	switch {
	case f.status != "":
		res, err := c.ExecStatus(short, bridge.ExecStatusParams{RunID: f.status, AgentID: f.agent, SessionKey: f.session})
		if err != nil {
			return wireError(err)
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
	case f.events == eventsDrain:
		res, err := c.Events(short, sess)
		if err != nil {
			return wireError(err)
		}
		if f.asJSON {
			return g.printJSON(res)
		}
		for _, e := range res.Events {
			fmt.Fprintln(g.stdout, e.Text)
		}
		return nil
	case f.slash != "":
		res, err := c.SessionCommand(short, bridge.SessionCommandParams{SessionKey: f.session, AgentID: f.agent, Text: f.slash})
		if err != nil {
			return wireError(err)
		}
		if f.asJSON {
			return g.printJSON(res)
		}
		fmt.Fprintln(g.stdout, res.Reply)
		return nil
	}
	text, err := commandText(args)
	if err != nil {
		return err
	}
	p := bridge.ExecParams{
		Command: text, Host: f.host, Security: f.security, Ask: f.ask, Node: f.node,
		Cwd: f.cwd, TimeoutSec: f.timeout, SessionKey: f.session, AgentID: f.agent, YieldMs: f.yieldMs,
		IdempotencyKey: f.idem,
	}
	if len(env) > 0 {
		p.Env = env
	}
	timeout := bridge.DefaultExecTimeout
	if f.timeout > 0 {
		timeout = time.Duration(f.timeout) * time.Second
	}
	cctx, ccancel := context.WithTimeout(ctx, timeout+2*bridge.InvokeMargin)
	defer ccancel()
	stop := startProgress(g.stderr, "waiting for the gateway (the command runs, or an approval is pending)")
	res, err := c.Exec(cctx, p)
	stop()
	if err != nil {
		var be *bridge.Error
		if errors.As(err, &be) && be.Code == bridge.CodeDenied && !f.asJSON {
			return g.denied(be.Message, be.Denial)
		}
		return wireError(err)
	}
	if f.asJSON {
		if err := g.printJSON(resultJSON{OK: true, ExecResult: res}); err != nil {
			return err
		}
	} else {
		for _, e := range res.Events {
			if f.events != eventsAll && e.RunID != res.RunID {
				continue // another call's event (--events all shows them)
			}
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
		if res.Truncated {
			g.truncationNote(res.DroppedBytes)
		}
		switch {
		case res.TimedOut && res.Error != "":
			// The host says what happened at the timeout (a sandbox that
			// could not kill the command says so): never claim a kill
			// that did not happen.
			fmt.Fprintln(g.stderr, prefixed(res.Error))
		case res.TimedOut:
			fmt.Fprintf(g.stderr, "exechost: command timed out; its process group was killed\n")
		case res.Error != "":
			fmt.Fprintln(g.stderr, prefixed(res.Error))
		}
	}
	switch {
	case res.Status != bridge.ExecCompleted:
		return nil
	case res.TimedOut:
		return exitError{code: ExitTimeout}
	case res.ExitCode < 0:
		// Killed without a status of its own (canceled: the gateway or
		// the host went away): the outcome is unknown.
		return exitError{code: ExitUnavailable}
	case res.ExitCode != 0:
		return exitError{code: res.ExitCode}
	}
	return nil
}

// commandText is the command of `run`'s and `exec`'s arguments, the same
// for both: one argument is shell text as given ('uname -a && id'); several
// are the words of one command, each kept one word (quoted), so
// `exec rm 'my file'` removes one file and `exec 'uname -a' x` runs a
// program named "uname -a" rather than silently joining the words.
func commandText(args []string) (string, error) {
	if len(args) == 1 {
		return args[0], nil
	}
	text, err := shellcmd.QuoteArgv(args)
	if err != nil {
		return "", usagef("%w", err)
	}
	return text, nil
}
