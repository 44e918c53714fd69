package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/hint"
)

// The exit-code contract of every command (docs/cli.md has the table, and
// TestExitCodes asserts it number for number). A command that runs a
// command (`run`, `exec`) exits with that command's own status when it ran
// to completion.
const (
	ExitOK      = 0
	ExitFailure = 1
	// ExitUsage: bad flags, arguments or subcommands, found before anything
	// is dialled or run.
	ExitUsage = 2
	// ExitTimeout: the command was killed at its timeout, or the gateway did
	// not answer within the caller's deadline (as timeout(1) exits).
	ExitTimeout = 124
	// ExitUnavailable: the gateway is down or unreachable, the connection
	// dropped, or the target (node, sandbox, approver exec host) is not
	// available.
	ExitUnavailable = 125
	// ExitDenied: the policy refused the command (security=deny, allowlist
	// miss, approval required — including an unreachable approver whose
	// askFallback is deny — or a human's deny). Nothing ran.
	ExitDenied = 126
)

// usageError marks errors that exit with ExitUsage. Every usage problem
// is typed so: the exit status never depends on cobra's English wording.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// usagef returns an error that makes the command exit with ExitUsage.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// usageHint is usagef with a hint (internal/hint): what to do instead.
func usageHint(h, format string, args ...any) error {
	return usageError{hint.Wrap(fmt.Errorf(format, args...), h)}
}

// exitError carries a specific exit status (the command's own code for
// `run`/`exec`) when everything worth saying has been printed already.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// codedError is an error with its exit status, printed like any other.
type codedError struct {
	code int
	err  error
}

func (c codedError) Error() string { return c.err.Error() }
func (c codedError) Unwrap() error { return c.err }

// withCode returns err carrying exit status code (nil stays nil).
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return codedError{code: code, err: err}
}

// ExitCode maps an error a command returned to its exit status.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ce codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	var ue usageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	return ExitFailure
}

// wireExitCode is the exit status of a gateway call that failed with err:
// an exit status the error already carries (an unreachable gateway), else
// the wire error's code, else how the connection failed.
func wireExitCode(err error) int {
	if c := ExitCode(err); c != ExitFailure {
		return c
	}
	var be *bridge.Error
	if errors.As(err, &be) {
		switch be.Code {
		case bridge.CodeDenied:
			return ExitDenied
		case bridge.CodeTimeout:
			return ExitTimeout
		case bridge.CodeUnavailable, bridge.CodeBusy:
			return ExitUnavailable
		}
		return ExitFailure
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return ExitTimeout
	case errors.Is(err, bridge.ErrClosed):
		return ExitUnavailable
	}
	return ExitFailure
}

// wireError gives err the exit status wireExitCode assigns it.
func wireError(err error) error {
	if err == nil {
		return nil
	}
	return withCode(wireExitCode(err), err)
}

// typeUsageErrors makes every usage problem cobra finds a usageError:
// argument-count checks are wrapped, and a command group (a command with
// subcommands and nothing to run itself) answers an unknown subcommand
// with a usage error instead of printing its help and exiting 0.
func typeUsageErrors(c *cobra.Command) {
	for _, sub := range c.Commands() {
		typeUsageErrors(sub)
	}
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			if cmd.SuggestionsMinimumDistance <= 0 {
				cmd.SuggestionsMinimumDistance = 2
			}
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += " (did you mean " + strings.Join(s, " or ") + "?)"
			}
			return usageHint(fmt.Sprintf("`%s --help` lists its commands", cmd.CommandPath()), "%s", msg)
		}
		return
	}
	if c.Args != nil {
		check := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError{hint.Wrap(fmt.Errorf("%s: %w", cmd.CommandPath(), err), fmt.Sprintf("`%s --help`", cmd.CommandPath()))}
			}
			return nil
		}
	}
}
