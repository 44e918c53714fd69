package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/client"
	"github.com/exechost/exechost/internal/mcpserver"
)

func init() { register("mcp", newMCPCmd) }

// Environment variables `exechost mcp` reads when the matching flag is not
// given, so an MCP client config can set them per agent.
const (
	EnvSession = "EXECHOST_SESSION"
	EnvAgent   = "EXECHOST_AGENT"
)

func newMCPCmd(g *globals) *cobra.Command {
	var url, sess, agent string
	var lf logFlags
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve MCP on stdio: the exec, nodes and exec_status tools, through the gateway",
		Long: `Serve the Model Context Protocol on stdin/stdout for agent clients (Claude
Desktop, Claude Code, Cursor, …). The server connects to the gateway as role
agent, proving --credential FILE (an agent credential from ` + "`exechost credentials issue`" + `,
which fixes the agent it acts for), else the gateway token from <state>/gateway.json,
and exposes the tools exec, nodes and exec_status. Denials are tool results
that say what to do; a gateway that is down makes a tool return an error
while the server keeps running and reconnects on the next call.

Logs go to stderr; stdout carries only the MCP stream.

  {"mcpServers":{"exechost":{"command":"exechost","args":["--credential","/path/agent-main.json","mcp","--gateway","ws://127.0.0.1:18789","--agent","main"]}}}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("session") {
				sess = os.Getenv(EnvSession)
			}
			if !cmd.Flags().Changed("agent") {
				agent = os.Getenv(EnvAgent)
			}
			log, err := lf.logger(g)
			if err != nil {
				return err
			}
			srv, err := mcpserver.New(mcpserver.Options{
				GatewayURL: url, SessionKey: sess, AgentID: agent, Logger: log, Version: Version,
				Dial: func(ctx context.Context, role string) (*client.Client, error) {
					return g.dialGateway(ctx, url, role)
				},
			})
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log.Info("mcp server on stdio", "gateway", url, "session", sess, "agent", agent)
			// An over-long request is answered, not fatal to the session.
			return srv.Run(ctx, mcpserver.GuardedStdio(os.Stdin, os.Stdout, mcpserver.MaxRequestLine))
		},
	}
	cmd.Flags().StringVar(&url, "gateway", DefaultGateway, "gateway URL")
	cmd.Flags().StringVar(&sess, "session", "", "session key (default $"+EnvSession+", else main)")
	cmd.Flags().StringVar(&agent, "agent", "", "agent id (default $"+EnvAgent+", else main)")
	lf.add(cmd)
	return cmd
}
