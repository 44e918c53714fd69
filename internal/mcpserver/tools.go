package mcpserver

import (
	"context"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/client"
)

// Tool names, as MCP clients list them.
const (
	ToolExec       = "exec"
	ToolNodes      = "nodes"
	ToolExecStatus = "exec_status"
)

// MaxYield bounds yieldMs, so that a tool call's deadline stays finite;
// a longer command keeps running in the background either way.
const MaxYield = 30 * time.Minute

// execMargin is added to a wait for exec's answer: node selection, the
// node round trip and the gateway's own invoke margin.
const execMargin = 40 * time.Second

// ExecInput is the exec tool's arguments. They mirror the gateway's exec
// params; empty fields defer to the session, agent and global config.
type ExecInput struct {
	Command    string            `json:"command" jsonschema:"shell command text to run, e.g. 'ls -la' or 'make test'"`
	Host       string            `json:"host,omitempty" jsonschema:"where to run: sandbox, gateway or node (default from the gateway's config)"`
	Security   string            `json:"security,omitempty" jsonschema:"requested security: deny, allowlist or full; the execution host's own policy is the ceiling"`
	Ask        string            `json:"ask,omitempty" jsonschema:"requested ask mode: off, on-miss or always"`
	Node       string            `json:"node,omitempty" jsonschema:"node id, display name, IP or id prefix when host=node (see the nodes tool)"`
	Cwd        string            `json:"cwd,omitempty" jsonschema:"absolute working directory on the execution host"`
	Env        map[string]string `json:"env,omitempty" jsonschema:"extra environment variables; variables that change what runs (PATH, LD_PRELOAD, …) are refused"`
	TimeoutSec int               `json:"timeoutSec,omitempty" jsonschema:"kill the command after this many seconds (default 1800)"`
	YieldMs    int               `json:"yieldMs,omitempty" jsonschema:"return a runId if the command is still running after this many milliseconds (default 10000, at most 1800000); it keeps running and exec_status reports on it"`
}

// StatusInput is the exec_status tool's arguments.
type StatusInput struct {
	RunID string `json:"runId" jsonschema:"the runId an exec call returned"`
}

// NodesInput is the nodes tool's (empty) arguments.
type NodesInput struct{}

func (s *Server) addTools() error {
	execSchema, err := jsonschema.For[ExecInput](nil)
	if err != nil {
		return fmt.Errorf("exec input schema: %w", err)
	}
	enum := func(name string, vals ...any) { execSchema.Properties[name].Enum = vals }
	enum("host", "sandbox", "gateway", "node")
	enum("security", "deny", "allowlist", "full")
	enum("ask", "off", "on-miss", "always")
	zero, maxYield := 0.0, float64(MaxYield.Milliseconds())
	execSchema.Properties["timeoutSec"].Minimum = &zero
	execSchema.Properties["yieldMs"].Minimum = &zero
	execSchema.Properties["yieldMs"].Maximum = &maxYield
	execSchema.Properties["command"].MinLength = jsonschema.Ptr(1)

	no := false
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:  ToolExec,
		Title: "Run a shell command",
		Description: "Run a shell command on the sandbox, the gateway host or a paired node, subject to that host's policy (allowlist, human approval). " +
			"Returns the exit code and output (capped at 200,000 bytes), or a runId when it is still running after yieldMs. " +
			"A denial says what was missing and what to do.",
		InputSchema: execSchema,
		Annotations: &mcp.ToolAnnotations{Title: "Run a shell command", OpenWorldHint: &no},
	}, s.execTool)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        ToolNodes,
		Title:       "List nodes",
		Description: "List the paired nodes this agent can target with exec host=node, with their connected status.",
		Annotations: &mcp.ToolAnnotations{Title: "List nodes", ReadOnlyHint: true, OpenWorldHint: &no},
	}, s.nodesTool)
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        ToolExecStatus,
		Title:       "Background run status",
		Description: "Report a background run's state (running, completed with its output, or failed with the reason) by the runId exec returned.",
		Annotations: &mcp.ToolAnnotations{Title: "Background run status", ReadOnlyHint: true, OpenWorldHint: &no},
	}, s.statusTool)
	return nil
}

// textResult is a tool result with one text content.
func textResult(text string, isError bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: isError}
}

func (s *Server) session() bridge.SessionParams {
	return bridge.SessionParams{SessionKey: s.opts.SessionKey, AgentID: s.opts.AgentID}
}

// yield returns the background threshold for an exec call.
func (s *Server) yield(ms int) time.Duration {
	if ms <= 0 {
		return s.opts.DefaultYield
	}
	return min(time.Duration(ms)*time.Millisecond, MaxYield)
}

func (s *Server) execTool(ctx context.Context, req *mcp.CallToolRequest, in ExecInput) (*mcp.CallToolResult, any, error) {
	yield := s.yield(in.YieldMs)
	p := bridge.ExecParams{
		Command: in.Command, Host: in.Host, Security: in.Security, Ask: in.Ask, Node: in.Node,
		Cwd: in.Cwd, Env: in.Env, TimeoutSec: in.TimeoutSec,
		SessionKey: s.opts.SessionKey, AgentID: s.opts.AgentID, YieldMs: int(yield.Milliseconds()),
	}
	p.Traceparent, p.Tracestate = traceContext(req)
	wait := yield
	if in.TimeoutSec > 0 {
		wait = min(wait, time.Duration(in.TimeoutSec)*time.Second)
	}
	var res bridge.ExecResult
	if err := s.link.do(ctx, bridge.MethodExec, wait+execMargin, func(ctx context.Context, c *client.Client) (err error) {
		res, err = c.Exec(ctx, p)
		return err
	}); err != nil {
		// The denial's own system event arrives on the next call, with
		// the rest of the session's events.
		return textResult(describeError(err), true), nil, nil
	}
	return textResult(formatEvents(otherRuns(res.Events, res.RunID))+formatExec(res, yield), res.Error != ""), nil, nil
}

func (s *Server) statusTool(ctx context.Context, _ *mcp.CallToolRequest, in StatusInput) (*mcp.CallToolResult, any, error) {
	if in.RunID == "" {
		return textResult("runId is required: pass the runId an exec call returned.\n", true), nil, nil
	}
	var st bridge.ExecStatusResult
	if err := s.link.do(ctx, bridge.MethodExecStatus, ShortCall, func(ctx context.Context, c *client.Client) (err error) {
		st, err = c.ExecStatus(ctx, bridge.ExecStatusParams{RunID: in.RunID, AgentID: s.opts.AgentID, SessionKey: s.opts.SessionKey})
		return err
	}); err != nil {
		return textResult(describeError(err), true), nil, nil
	}
	return textResult(s.events(ctx, st.RunID)+formatStatus(st), false), nil, nil
}

func (s *Server) nodesTool(ctx context.Context, _ *mcp.CallToolRequest, _ NodesInput) (*mcp.CallToolResult, any, error) {
	// The gateway answers an agent with only the nodes that agent may
	// target (its tools.exec.node binding, or all nodes when unbound).
	var res bridge.NodesResult
	if err := s.link.do(ctx, bridge.MethodNodesList, ShortCall, func(ctx context.Context, c *client.Client) (err error) {
		res, err = c.Nodes(ctx, s.session())
		return err
	}); err != nil {
		return textResult(describeError(err), true), nil, nil
	}
	return textResult(s.events(ctx, "")+formatNodes(res.Nodes, ""), false), nil, nil
}

// events drains the session's queued system events, except those of
// runID, for prepending to a result. Failing to fetch them is not worth
// failing the tool: unless the gateway drained them before the failure,
// they stay queued for the next call.
func (s *Server) events(ctx context.Context, runID string) string {
	var res bridge.SessionEventsResult
	if err := s.link.do(ctx, bridge.MethodSessionEvents, ShortCall, func(ctx context.Context, c *client.Client) (err error) {
		res, err = c.Events(ctx, s.session())
		return err
	}); err != nil {
		s.opts.Logger.Warn("session.events failed", "err", err)
		return ""
	}
	return formatEvents(otherRuns(res.Events, runID))
}

// traceContext is the W3C trace context an MCP client put in the call's
// _meta ("traceparent", "tracestate"), passed on so the gateway's exec
// span continues the agent's trace (docs/tracing.md).
func traceContext(req *mcp.CallToolRequest) (traceparent, tracestate string) {
	if req == nil || req.Params == nil {
		return "", ""
	}
	traceparent, _ = req.Params.Meta["traceparent"].(string)
	tracestate, _ = req.Params.Meta["tracestate"].(string)
	return traceparent, tracestate
}
