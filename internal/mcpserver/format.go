package mcpserver

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/explain"
)

// The model reads every string below: each result says what happened and,
// when something went wrong, what to do next, in words an agent can act on.

// formatEvents renders a session's system events as the block prepended to
// a tool result ("System events:\n- …"), or "" when there are none. An
// event's output tail continues on indented lines under its bullet.
func formatEvents(evs []bridge.SystemEvent) string {
	if len(evs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("System events:\n")
	for _, e := range evs {
		text := strings.TrimRight(e.Text, "\n")
		first, rest, _ := strings.Cut(text, "\n")
		b.WriteString("- " + first + "\n")
		if rest != "" {
			for line := range strings.SplitSeq(rest, "\n") {
				b.WriteString("  " + line + "\n")
			}
		}
	}
	b.WriteString("\n")
	return b.String()
}

// otherRuns drops the events of runID: the result they come with already
// reports that run, so repeating its start and output would only add noise.
func otherRuns(evs []bridge.SystemEvent, runID string) []bridge.SystemEvent {
	if runID == "" {
		return evs
	}
	var out []bridge.SystemEvent
	for _, e := range evs {
		if e.RunID != runID {
			out = append(out, e)
		}
	}
	return out
}

// where describes a run's execution host for a result line.
func where(host, nodeID, runID string) string {
	var parts []string
	if host != "" {
		parts = append(parts, "host="+host)
	}
	if nodeID != "" {
		parts = append(parts, "node="+nodeID)
	}
	if runID != "" {
		parts = append(parts, "runId="+runID)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// formatExec renders an exec result: a background run's id, or a finished
// run's exit code, flags and output. The output is shown as the host
// returned it, so a capped stream keeps its "… (truncated)" marker.
func formatExec(res bridge.ExecResult, yield time.Duration) string {
	var b strings.Builder
	if res.Status == bridge.ExecRunning {
		fmt.Fprintf(&b, "Still running in the background after %s: runId=%s%s.\n", yield, res.RunID, where(res.Host, res.NodeID, ""))
		fmt.Fprintf(&b, "Check it with the exec_status tool ({\"runId\":%q}); its finish also arrives as a system event on a later call.\n", res.RunID)
		return b.String()
	}
	fmt.Fprintf(&b, "Exit code: %d%s\n", res.ExitCode, where(res.Host, res.NodeID, res.RunID))
	if res.TimedOut {
		b.WriteString("Timed out: yes — the command was killed at its timeout (timeoutSec); the output may be incomplete.\n")
	}
	if res.Error != "" {
		b.WriteString("Error: " + res.Error + "\n")
	}
	if res.Truncated {
		dropped := ""
		if res.DroppedBytes > 0 {
			dropped = fmt.Sprintf(" %d more bytes were dropped;", res.DroppedBytes)
		}
		b.WriteString("Output truncated: stdout and stderr together are capped at 200,000 bytes;" + dropped + " the cut is marked \"… (truncated)\".\n")
	}
	if res.Stdout == "" && res.Stderr == "" {
		b.WriteString("(no output)\n")
		return b.String()
	}
	writeStream(&b, "stdout", res.Stdout)
	writeStream(&b, "stderr", res.Stderr)
	return b.String()
}

func writeStream(b *strings.Builder, name, s string) {
	if s == "" {
		return
	}
	b.WriteString("--- " + name + " ---\n")
	b.WriteString(s)
	if !strings.HasSuffix(s, "\n") {
		b.WriteString("\n")
	}
}

// formatStatus renders exec.status's answer.
func formatStatus(st bridge.ExecStatusResult) string {
	switch st.Status {
	case bridge.RunRunning:
		return fmt.Sprintf("Run %s is still running%s.\nCheck again later with exec_status; its finish also arrives as a system event.\n",
			st.RunID, where(st.Host, st.NodeID, ""))
	case bridge.RunCompleted:
		if st.Result == nil {
			return fmt.Sprintf("Run %s completed%s.\n", st.RunID, where(st.Host, st.NodeID, ""))
		}
		return fmt.Sprintf("Run %s completed.\n", st.RunID) + formatExec(*st.Result, 0)
	case bridge.RunFailed:
		msg := "no reason given"
		if st.Error != nil {
			msg = describeWireError(st.Error)
		}
		return fmt.Sprintf("Run %s failed%s: %s", st.RunID, where(st.Host, st.NodeID, ""), msg)
	}
	return fmt.Sprintf("Run %s: status %q%s.\n", st.RunID, st.Status, where(st.Host, st.NodeID, ""))
}

// describeWireError renders a gateway's error answer: a denial with what
// to do about it, or the error with a hint chosen by its code.
func describeWireError(e *bridge.Error) string {
	if e.Code == bridge.CodeDenied {
		// What was missing, which policy decided and the fixing command,
		// in the same words as the CLI (internal/explain).
		return "Denied: " + e.Message + "\n" + explain.Text(e.Denial) + denialAdvice(e.Denial) + "\n"
	}
	var hint string
	switch e.Code {
	case bridge.CodeNodeRequired, bridge.CodeAmbiguous:
		hint = "What to do: name a node with the node parameter; the nodes tool lists them."
	case bridge.CodeNotFound:
		hint = "What to do: check the name or id you passed (the nodes tool lists nodes; exec returns runIds)."
	case bridge.CodeInvalidRequest:
		hint = "What to do: fix the parameter named above and call again."
	case bridge.CodeUnavailable:
		hint = "What to do: the target is not available right now; try another host or node, or ask a human to start it."
	case bridge.CodeForbidden, bridge.CodeUnauthorized:
		hint = "What to do: this needs a permission the agent does not have; ask a human."
	case bridge.CodeBusy, bridge.CodeTimeout:
		hint = "What to do: retry later."
	}
	s := fmt.Sprintf("%s (%s)\n", e.Message, e.Code)
	if hint != "" {
		s += hint + "\n"
	}
	return s
}

// denialAdvice tells the model how to act on a denial, by its structured
// reason (bridge.Denial.Reason, never the message's text); a known fixing
// command is named as what to ask a human to run.
func denialAdvice(d *bridge.Denial) string {
	reason := ""
	if d != nil {
		reason = d.Reason
	}
	switch {
	case d != nil && d.Construct != "":
		return "What to do: rewrite the command without " + d.Construct + " (no allowlist can allow it), or ask a human to approve it."
	case d != nil && d.Fix != "" && reason != bridge.ReasonUserDenied:
		return "What to do: do not retry the same command. Use only allowlisted executables, or ask a human to run `" + d.Fix + "` on a machine with the gateway's token, then retry."
	}
	switch reason {
	case bridge.ReasonDisabled:
		return "What to do: exec is disabled (security=deny) for this agent on that host. Do not retry; ask a human to enable it " +
			"(tools.exec.security in the gateway's exechost.json and security in the execution host's exec-approvals.json), or use a host where it is enabled."
	case bridge.ReasonAllowlistMiss:
		return "What to do: do not retry the same command. Use only allowlisted executables, or ask a human to allowlist the executable on the execution host " +
			"(`exechost approvals allowlist add PATH --agent ID`) or to approve the command, then retry."
	case bridge.ReasonApprovalRequired:
		return "What to do: this command needs a human's approval and no approver answered. Ask a human to run `exechost approver` on the execution host " +
			"(or open its web UI) and retry, or use only allowlisted executables."
	case bridge.ReasonUserDenied:
		return "What to do: a human denied this command. Do not retry it; ask the user how to proceed."
	}
	return "What to do: follow the hint above, or ask a human."
}

// formatNodes renders the nodes an agent may target.
func formatNodes(nodes []bridge.NodeView, note string) string {
	var b strings.Builder
	if len(nodes) == 0 {
		b.WriteString("No nodes are paired with the gateway. (hint: a human runs `exechost node run --gateway URL` on a machine, then `exechost nodes approve ID`)\n")
	} else {
		fmt.Fprintf(&b, "Nodes (%d):\n", len(nodes))
		for _, n := range nodes {
			name := n.DisplayName
			if name == "" {
				name = n.NodeID
			}
			status := "connected"
			if !n.Connected {
				status = "disconnected"
				if n.LastSeen > 0 {
					status += ", last seen " + time.UnixMilli(n.LastSeen).UTC().Format(time.DateTime) + " UTC"
				}
			}
			fmt.Fprintf(&b, "- %s: nodeId=%s, %s", name, n.NodeID, status)
			if n.Platform != "" {
				b.WriteString(", platform=" + n.Platform)
			}
			if n.RemoteIP != "" {
				b.WriteString(", ip=" + n.RemoteIP)
			}
			b.WriteString("\n")
		}
		b.WriteString("Target one with exec host=node and node=<nodeId or name>; only connected nodes can run commands.\n")
	}
	if note != "" {
		b.WriteString(note + "\n")
	}
	return b.String()
}

// describeError renders any error a tool call ended with: the gateway's
// answer, an unreachable or lost gateway, or a deadline.
func describeError(err error) string {
	var we *bridge.Error
	switch {
	case errors.Is(err, ErrUnreachable), errors.Is(err, ErrConnectionLost):
		return err.Error() + "\n"
	case errors.As(err, &we):
		return describeWireError(we)
	}
	return err.Error() + "\n"
}
