// Package mcpserver is `exechost mcp`: a Model Context Protocol server (on
// stdio, with the official go-sdk) through which agent clients such as
// Claude Desktop, Claude Code or Cursor run commands via an exechost
// gateway. It connects to the gateway as role agent with a session key
// and agent id, and exposes three tools: exec, nodes and exec_status.
//
// Everything the gateway says, denials included, reaches the model as a
// tool result it can act on, never as a protocol error; a gateway that is
// down or restarting makes a tool return a clear error while the server
// keeps running and reconnects on the next call.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultYield is how long exec waits for a command before returning its
// runId and letting it continue in the background. MCP clients time out
// long tool calls, so a long build is better polled with exec_status than
// waited for.
const DefaultYield = 10 * time.Second

// Options configure a Server.
type Options struct {
	// GatewayURL is shown in errors ("gateway unreachable at URL").
	GatewayURL string
	// SessionKey and AgentID address the agent's session on the gateway;
	// empty means the gateway's defaults ("main").
	SessionKey string
	AgentID    string
	// Dial opens an authenticated gateway connection. Required.
	Dial DialFunc
	// Logger receives operational logs; it must not write to stdout, which
	// carries the MCP stream. Nil discards them.
	Logger *slog.Logger
	// Version is reported to MCP clients.
	Version string
	// DefaultYield replaces DefaultYield when positive.
	DefaultYield time.Duration
}

// Server is one MCP server bound to one gateway session. Create it with
// New, run it with Run.
type Server struct {
	opts Options
	link *link
	mcp  *mcp.Server
}

// New builds the server and registers its tools.
func New(opts Options) (*Server, error) {
	if opts.Dial == nil {
		return nil, errors.New("mcpserver: no gateway dialer")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.DefaultYield <= 0 {
		opts.DefaultYield = DefaultYield
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	s := &Server{
		opts: opts,
		link: &link{url: opts.GatewayURL, dial: opts.Dial, log: opts.Logger},
	}
	// The SDK logs every session step at info; keep that for debugging.
	var sdkLog *slog.Logger
	if opts.Logger.Enabled(context.Background(), slog.LevelDebug) {
		sdkLog = opts.Logger
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "exechost", Title: "exechost", Version: opts.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       sdkLog,
		Capabilities: &mcp.ServerCapabilities{},
	})
	if err := s.addTools(); err != nil {
		return nil, err
	}
	return s, nil
}

// instructions tell the client's model how the tools fit together.
const instructions = `exechost runs shell commands for you on a sandbox, the gateway host or a paired node, under the execution host's own policy (allowlist, human approval).
Use exec to run a command; a command still running after yieldMs returns a runId that exec_status reports on. Use nodes to see which nodes you can target with host=node.
A denial explains what was missing and what to do; do not retry a denied command unchanged. Lines under "System events:" report earlier runs (started, finished, denied).`

// Run serves MCP on t until the client disconnects or ctx ends, then
// closes the gateway connection.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	defer s.link.close()
	err := s.mcp.Run(ctx, t)
	if err != nil && ctx.Err() != nil {
		return nil // asked to stop
	}
	if err != nil {
		return fmt.Errorf("mcp server: %w", err)
	}
	return nil
}

// MCP returns the underlying SDK server, for transports other than Run's
// (tests use in-memory transports).
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Close closes the gateway connection; tool calls after it reconnect.
func (s *Server) Close() { s.link.close() }
