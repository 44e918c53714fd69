package mcpserver

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/bridge"
)

func TestFormatEvents(t *testing.T) {
	tests := []struct {
		name string
		evs  []bridge.SystemEvent
		want string
	}{
		{"none", nil, ""},
		{"one", []bridge.SystemEvent{{Text: "Exec started (node=n1, id=r1)"}},
			"System events:\n- Exec started (node=n1, id=r1)\n\n"},
		{"tail is indented under its bullet", []bridge.SystemEvent{
			{Text: "Exec finished (node=n1, id=r1, code=0)\nhello\nworld\n"},
			{Text: "Exec denied (node=n1, id=r2, SYSTEM_RUN_DENIED: allowlist miss)"},
		}, "System events:\n- Exec finished (node=n1, id=r1, code=0)\n  hello\n  world\n- Exec denied (node=n1, id=r2, SYSTEM_RUN_DENIED: allowlist miss)\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, formatEvents(tt.evs)); diff != "" {
				t.Errorf("formatEvents (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOtherRuns(t *testing.T) {
	evs := []bridge.SystemEvent{{Text: "a", RunID: "r1"}, {Text: "b", RunID: "r2"}, {Text: "c"}, {Text: "d", RunID: "r1"}}
	tests := []struct {
		runID string
		want  []string
	}{
		{"", []string{"a", "b", "c", "d"}},
		{"r1", []string{"b", "c"}},
		{"r9", []string{"a", "b", "c", "d"}},
	}
	for _, tt := range tests {
		var got []string
		for _, e := range otherRuns(evs, tt.runID) {
			got = append(got, e.Text)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("otherRuns(%q) (-want +got):\n%s", tt.runID, diff)
		}
	}
}

func TestFormatExec(t *testing.T) {
	tests := []struct {
		name string
		res  bridge.ExecResult
		want string
	}{
		{"output", bridge.ExecResult{Status: bridge.ExecCompleted, RunID: "run-1", Host: "node", NodeID: "n1", SystemRunResult: bridge.SystemRunResult{Stdout: "hi\n", Stderr: "warn"}},
			"Exit code: 0 (host=node, node=n1, runId=run-1)\n--- stdout ---\nhi\n--- stderr ---\nwarn\n"},
		{"no output", bridge.ExecResult{Status: bridge.ExecCompleted, Host: "gateway", SystemRunResult: bridge.SystemRunResult{ExitCode: 3}},
			"Exit code: 3 (host=gateway)\n(no output)\n"},
		{"timed out", bridge.ExecResult{Status: bridge.ExecCompleted, SystemRunResult: bridge.SystemRunResult{ExitCode: -1, TimedOut: true, Stdout: "partial"}},
			"Exit code: -1\nTimed out: yes — the command was killed at its timeout (timeoutSec); the output may be incomplete.\n--- stdout ---\npartial\n"},
		{"truncated keeps the marker", bridge.ExecResult{Status: bridge.ExecCompleted, SystemRunResult: bridge.SystemRunResult{Truncated: true, Stdout: "aaaa… (truncated)"}},
			"Exit code: 0\nOutput truncated: stdout and stderr together are capped at 200,000 bytes; the cut is marked \"… (truncated)\".\n--- stdout ---\naaaa… (truncated)\n"},
		{"spawn error", bridge.ExecResult{Status: bridge.ExecCompleted, SystemRunResult: bridge.SystemRunResult{ExitCode: 127, Error: "exec: not found"}},
			"Exit code: 127\nError: exec: not found\n(no output)\n"},
		{"background", bridge.ExecResult{Status: bridge.ExecRunning, RunID: "run-9", Host: "node", NodeID: "n1"},
			"Still running in the background after 10s: runId=run-9 (host=node, node=n1).\n" +
				"Check it with the exec_status tool ({\"runId\":\"run-9\"}); its finish also arrives as a system event on a later call.\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, formatExec(tt.res, 10*time.Second)); diff != "" {
				t.Errorf("formatExec (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFormatStatus(t *testing.T) {
	done := bridge.ExecResult{Status: bridge.ExecCompleted, RunID: "run-1", Host: "node", NodeID: "n1", SystemRunResult: bridge.SystemRunResult{Stdout: "ok\n"}}
	tests := []struct {
		name string
		st   bridge.ExecStatusResult
		want string
	}{
		{"running", bridge.ExecStatusResult{RunID: "run-1", Status: bridge.RunRunning, Host: "node", NodeID: "n1"},
			"Run run-1 is still running (host=node, node=n1).\nCheck again later with exec_status; its finish also arrives as a system event.\n"},
		{"completed", bridge.ExecStatusResult{RunID: "run-1", Status: bridge.RunCompleted, Host: "node", NodeID: "n1", Result: &done},
			"Run run-1 completed.\nExit code: 0 (host=node, node=n1, runId=run-1)\n--- stdout ---\nok\n"},
		{"failed by denial", bridge.ExecStatusResult{RunID: "run-2", Status: bridge.RunFailed, Host: "node",
			Error: &bridge.Error{Code: bridge.CodeDenied, Message: "SYSTEM_RUN_DENIED: user denied", Denial: &bridge.Denial{Reason: bridge.ReasonUserDenied}}},
			"Run run-2 failed (host=node): Denied: SYSTEM_RUN_DENIED: user denied\n" +
				"What to do: a human denied this command. Do not retry it; ask the user how to proceed.\n"},
		{"failed without error", bridge.ExecStatusResult{RunID: "run-3", Status: bridge.RunFailed},
			"Run run-3 failed: no reason given"},
		{"unknown status", bridge.ExecStatusResult{RunID: "run-4", Status: "paused"},
			"Run run-4: status \"paused\".\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, formatStatus(tt.st)); diff != "" {
				t.Errorf("formatStatus (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescribeError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want []string // substrings, in order
	}{
		{"allowlist miss", &bridge.Error{Code: bridge.CodeDenied, Message: "SYSTEM_RUN_DENIED: allowlist miss; not allowlisted: /usr/bin/ls (hint: …)", Denial: &bridge.Denial{Reason: bridge.ReasonAllowlistMiss}},
			[]string{"Denied: SYSTEM_RUN_DENIED: allowlist miss; not allowlisted: /usr/bin/ls", "What to do: do not retry the same command", "exechost approvals allowlist add"}},
		{"disabled", &bridge.Error{Code: bridge.CodeDenied, Message: "SYSTEM_RUN_DISABLED: security=deny", Denial: &bridge.Denial{Reason: bridge.ReasonDisabled}},
			[]string{"Denied: SYSTEM_RUN_DISABLED: security=deny", "exec is disabled (security=deny)", "ask a human to enable it"}},
		{"approval required", &bridge.Error{Code: bridge.CodeDenied, Message: "SYSTEM_RUN_DENIED: approval required", Denial: &bridge.Denial{Reason: bridge.ReasonApprovalRequired}},
			[]string{"Denied: SYSTEM_RUN_DENIED: approval required", "Ask a human to run `exechost approver`"}},
		{"binding", &bridge.Error{Code: bridge.CodeDenied, Message: `agent "main" is bound to node n1 by tools.exec.node (hint: omit the node)`},
			[]string{"Denied: agent \"main\" is bound", "What to do: follow the hint above, or ask a human."}},
		{"node required", &bridge.Error{Code: bridge.CodeNodeRequired, Message: "node required: 2 nodes are paired"},
			[]string{"node required: 2 nodes are paired (NODE_REQUIRED)", "the nodes tool lists them"}},
		{"invalid", &bridge.Error{Code: bridge.CodeInvalidRequest, Message: `invalid host "moon"`},
			[]string{`invalid host "moon" (INVALID_REQUEST)`, "fix the parameter"}},
		{"internal", &bridge.Error{Code: bridge.CodeInternal, Message: "host=gateway: boom"},
			[]string{"host=gateway: boom (INTERNAL)\n"}},
		{"wrapped wire error", fmt.Errorf("exec: %w", &bridge.Error{Code: bridge.CodeUnavailable, Message: "node n1 is paired but not connected"}),
			[]string{"node n1 is paired but not connected (UNAVAILABLE)", "try another host or node"}},
		{"unreachable", fmt.Errorf("%w at ws://127.0.0.1:1: refused; is `exechost gateway` running?", ErrUnreachable),
			[]string{"gateway unreachable at ws://127.0.0.1:1: refused; is `exechost gateway` running?\n"}},
		{"other", errors.New("plain failure"), []string{"plain failure\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := describeError(tt.err)
			rest := got
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("describeError = %q\nmissing (in order) %q", got, w)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

func TestFormatNodes(t *testing.T) {
	tests := []struct {
		name  string
		nodes []bridge.NodeView
		note  string
		want  string
	}{
		{"none", nil, "", "No nodes are paired with the gateway. (hint: a human runs `exechost node run --gateway URL` on a machine, then `exechost nodes approve ID`)\n"},
		{"two", []bridge.NodeView{
			{NodeID: "abc123", DisplayName: "build-box", Connected: true, Platform: "linux/amd64", RemoteIP: "10.0.0.5"},
			{NodeID: "def456", LastSeen: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixMilli()},
		}, "Note: bound.",
			"Nodes (2):\n" +
				"- build-box: nodeId=abc123, connected, platform=linux/amd64, ip=10.0.0.5\n" +
				"- def456: nodeId=def456, disconnected, last seen 2026-01-02 03:04:05 UTC\n" +
				"Target one with exec host=node and node=<nodeId or name>; only connected nodes can run commands.\n" +
				"Note: bound.\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, formatNodes(tt.nodes, tt.note)); diff != "" {
				t.Errorf("formatNodes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		fails int
		want  time.Duration
	}{
		{1, MinBackoff}, {2, 2 * MinBackoff}, {3, 4 * MinBackoff}, {5, 16 * MinBackoff}, {6, MaxBackoff}, {100, MaxBackoff},
	}
	for _, tt := range tests {
		if got := backoff(tt.fails); got != tt.want {
			t.Errorf("backoff(%d) = %s, want %s", tt.fails, got, tt.want)
		}
	}
}

func TestUnreachableHints(t *testing.T) {
	l := &link{url: "ws://127.0.0.1:1"}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"refused", errors.New("dial tcp: connection refused"),
			"gateway unreachable at ws://127.0.0.1:1: dial tcp: connection refused; is `exechost gateway` running? (this MCP server keeps running and reconnects on the next call)"},
		{"socket error shown without the wrapping", fmt.Errorf("connect to gateway ws://x: dial ws://x: failed: %w (hint: is `exechost gateway` running there?)",
			&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}),
			"gateway unreachable at ws://127.0.0.1:1: dial tcp: connect: connection refused; is `exechost gateway` running? (this MCP server keeps running and reconnects on the next call)"},
		{"dialer already hints", errors.New("dial: refused (hint: is `exechost gateway` running there?)"),
			"gateway unreachable at ws://127.0.0.1:1: dial: refused (hint: is `exechost gateway` running there?) (this MCP server keeps running and reconnects on the next call)"},
		{"bad token", fmt.Errorf("connect: %w", &bridge.Error{Code: bridge.CodeUnauthorized, Message: "bad token"}),
			"gateway unreachable at ws://127.0.0.1:1: connect: bad token (hint: the MCP server needs the gateway's token: run it with the gateway's --state-dir or set EXECHOST_GATEWAY_TOKEN) (this MCP server keeps running and reconnects on the next call)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := l.unreachable(tt.err)
			if !errors.Is(err, ErrUnreachable) {
				t.Errorf("unreachable(%v) does not wrap ErrUnreachable", tt.err)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("unreachable (-want +got):\n%s", diff)
			}
		})
	}
}
