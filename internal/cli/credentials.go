package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/gateway"
	"github.com/exechost/exechost/internal/state"
)

func init() { register("credentials", newCredentialsCmd) }

// newCredentialsCmd is `exechost credentials`: issue, list and revoke the
// per-agent and per-operator credentials of the gateway whose state
// directory this is. They act on the state directory directly (the
// gateway reads its list on every connect), so they need no connection.
func newCredentialsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "credentials",
		Short: "Issue, list and revoke client credentials (per agent, per operator)",
		Long: `A credential is an Ed25519 key: the gateway keeps its public half in
<state>/credentials.json, the holder keeps the credential file (mode 0600),
which also pins the gateway's key. A client proves it by signing each
connection's challenge; the key never travels. An agent credential acts for
exactly one agent id, whatever the client claims; an operator credential
may act for any agent and manage nodes and approvals.`,
	}
	var role, agent, out, url string
	issue := &cobra.Command{
		Use:   "issue NAME",
		Short: "Issue a credential; its file is written once (default <state>/credentials/NAME.json, 0600)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			dir, err := g.dir()
			if err != nil {
				return err
			}
			if role == "" {
				role = bridge.RoleAgent
				if agent == "" {
					role = bridge.RoleOperator
				}
			}
			cf, path, err := gateway.IssueCredential(dir, gateway.IssueOptions{Name: args[0], Role: role, Agent: agent, GatewayURL: url, Out: out})
			if err != nil {
				return err
			}
			if path == "-" {
				// Printed once: nothing else keeps the private key.
				return g.printJSON(cf)
			}
			who := "operator"
			if cf.Role == bridge.RoleAgent {
				who = "agent " + cf.Agent
			}
			fmt.Fprintf(g.stdout, "issued %s (%s) for %s: %s\nconnect with: exechost --credential %s …\n", cf.Name, cf.ID, who, path, path)
			return nil
		},
	}
	issue.Flags().StringVar(&role, "role", "", "agent or operator (default: agent with --agent, else operator)")
	issue.Flags().StringVar(&agent, "agent", "", "the agent id an agent credential acts for")
	issue.Flags().StringVar(&out, "out", "", "write the credential file here instead (\"-\" prints it once to stdout)")
	issue.Flags().StringVar(&url, "gateway", DefaultGateway, "gateway URL recorded in the credential file")
	list := &cobra.Command{
		Use:   "list",
		Short: "List issued credentials (never their keys)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			dir, err := g.dir()
			if err != nil {
				return err
			}
			recs, err := gateway.ListCredentials(dir)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tID\tROLE\tAGENT\tCREATED")
			for _, r := range recs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.ID, r.Role, r.Agent, time.UnixMilli(r.CreatedAt).UTC().Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke NAME|ID",
		Short: "Revoke a credential: its holder can no longer connect",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			dir, err := g.dir()
			if err != nil {
				return err
			}
			r, err := gateway.RevokeCredential(dir, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "revoked %s (%s); connections it already opened end when they close\n", r.Name, r.ID)
			return nil
		},
	}
	cmd.AddCommand(issue, list, revoke)
	return cmd
}

// upAgentCredential is the credential `exechost up` issues for its MCP
// clients: agent main's, so the model's tool calls act for that agent
// only, never as an operator.
const upAgentCredential = "agent-main"

// ensureUpAgentCredential returns the path of the credential `up` gives
// its MCP clients, issuing it on the first run (and again if its file was
// deleted).
func ensureUpAgentCredential(dir, url string) (string, error) {
	path := state.CredentialPath(dir, upAgentCredential)
	if _, err := bridge.ReadCredentialFile(path); err == nil {
		return path, nil
	}
	recs, err := gateway.ListCredentials(dir)
	if err != nil {
		return "", err
	}
	for _, r := range recs {
		if r.Name == upAgentCredential {
			if _, err := gateway.RevokeCredential(dir, r.ID); err != nil {
				return "", err
			}
		}
	}
	_, path, err = gateway.IssueCredential(dir, gateway.IssueOptions{Name: upAgentCredential, Role: bridge.RoleAgent, Agent: "main", GatewayURL: url})
	return path, err
}
