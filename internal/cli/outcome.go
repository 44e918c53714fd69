package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/explain"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/runner"
)

// How `run` and `exec` report an outcome, the same way for both: a result,
// or one error object with --json; the output, a truncation note and the
// reason of a denial (what was missing, which policy decided, the fixing
// command) otherwise.

// resultJSON is the object `exec --json` / `run --json` print for a
// command that ran (or is running in the background).
type resultJSON struct {
	OK bool `json:"ok"`
	bridge.ExecResult
}

// errorJSON is the object `exec --json` / `run --json` print when nothing
// ran, or the outcome is unknown: exactly one, on stdout, whatever failed.
type errorJSON struct {
	OK bool `json:"ok"`
	// Code is the gateway's error code (DENIED, UNAVAILABLE, …) or, for
	// errors found before any call, USAGE, UNAVAILABLE or FAILED.
	Code     string `json:"code"`
	ExitCode int    `json:"exitCode"`
	Message  string `json:"message"`
	// The denial's details (reason, missing, construct, position, policy,
	// unknownKeys, fix, hint), flattened; hint is set for other errors too.
	bridge.Denial
}

// Codes errorJSON uses for errors that did not come from the gateway.
const (
	codeUsage       = "USAGE"
	codeUnavailable = bridge.CodeUnavailable
	codeTimeout     = bridge.CodeTimeout
	codeFailed      = "FAILED"
)

// errorObject describes err as errorJSON with exit status code.
func errorObject(err error, code int) errorJSON {
	out := errorJSON{Code: codeFailed, ExitCode: code, Message: err.Error()}
	var be *bridge.Error
	switch {
	case errors.As(err, &be):
		out.Code, out.Message = be.Code, be.Message
		if be.Denial != nil {
			out.Denial = *be.Denial
		}
	case code == ExitUsage:
		out.Code = codeUsage
	case code == ExitUnavailable:
		out.Code = codeUnavailable
	case code == ExitTimeout:
		out.Code = codeTimeout
	}
	if out.Hint == "" {
		out.Hint = hint.Of(err)
	}
	return out
}

// denied prints a denial for a person: the message, then what explain
// knows, indented; it returns the error that exits ExitDenied.
func (g *globals) denied(msg string, d *bridge.Denial) error {
	if line := decisionLine(d); line != "" {
		// The lines below say what was missing, which policy decided
		// and the exact command that fixes it: the first line needs
		// only the decision, not the nested hints the message carries
		// for readers that get nothing else.
		msg = line
	}
	fmt.Fprintf(g.stderr, "exechost: denied: %s\n", msg)
	for line := range strings.SplitSeq(strings.TrimRight(explain.Text(d), "\n"), "\n") {
		if line != "" {
			fmt.Fprintf(g.stderr, "  %s\n", line)
		}
	}
	return exitError{ExitDenied}
}

// truncationNote is printed on stderr when output was capped, so a reader
// of stdout alone is not the only one who can tell. dropped is 0 when the
// execution host did not say (a sandbox backend, an older node).
func (g *globals) truncationNote(dropped int64) {
	how := "the rest was dropped"
	if dropped > 0 {
		how = fmt.Sprintf("%d more bytes were dropped", dropped)
	}
	fmt.Fprintf(g.stderr, "exechost: output truncated: stdout and stderr together are capped at %d bytes; %s (hint: write large output to a file on the host and read it in parts)\n", runner.MaxOutput, how)
}

// decisionLine is the design's error for d's reason ("SYSTEM_RUN_DENIED:
// approval required") when d also has the exact fixing command, else "".
func decisionLine(d *bridge.Denial) string {
	if d == nil || d.Fix == "" || d.Reason == "" {
		return ""
	}
	for _, e := range []error{policy.ErrDisabled, policy.ErrAllowlistMiss, policy.ErrApprovalRequired, policy.ErrUserDenied} {
		if bridge.DenialReason(e) == d.Reason {
			return e.Error()
		}
	}
	return ""
}
