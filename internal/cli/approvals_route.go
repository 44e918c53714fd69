package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/approvalroute"
	"github.com/exechost/exechost/internal/approverui"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/textsafe"
)

// newApprovalsPendingCmd is `exechost approvals pending`: the prompts
// waiting at the gateway for an operator, from every execution host.
func newApprovalsPendingCmd(g *globals) *cobra.Command {
	var url string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "pending",
		Short: "List exec prompts waiting at the gateway for an operator's answer",
		Long: `List the exec prompts routed to the gateway (execution hosts with
approvals.route gateway or both) that wait for an operator. Answer one with
` + "`exechost approvals resolve ID DECISION`" + `; any unique prefix of the id works.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res approvalroute.PendingResult
			if err := g.call(cmd.Context(), url, approvalroute.MethodPending, struct{}{}, &res); err != nil {
				return fmt.Errorf("list pending approvals: %w", err)
			}
			if asJSON {
				return g.printJSON(res)
			}
			if len(res.Approvals) == 0 {
				fmt.Fprintln(g.stdout, "no pending approvals")
				return nil
			}
			for _, a := range res.Approvals {
				where := a.Host
				if a.NodeID != "" {
					where += " " + a.NodeID
				}
				left := time.Until(time.UnixMilli(a.ExpiresAtMs)).Round(time.Second)
				// Everything here comes from an execution host: control
				// characters are shown escaped, never sent to the terminal.
				fmt.Fprintf(g.stdout, "%s  %s  agent=%s session=%s  expires in %s (then askFallback=%s)\n",
					textsafe.Line(a.ID), textsafe.Line(where), textsafe.Line(a.Request.AgentID), textsafe.Line(a.Request.SessionKey), left, textsafe.Line(a.Request.Fallback))
				fmt.Fprintf(g.stdout, "    cwd: %s\n    command: %s\n", textsafe.Line(a.Request.Cwd), textsafe.Line(a.Request.Command))
				for i, p := range a.Request.ResolvedPaths {
					mark := "not allowlisted"
					if i < len(a.Request.Allowlisted) && a.Request.Allowlisted[i] {
						mark = "allowlisted"
					}
					fmt.Fprintf(g.stdout, "    runs: %s (%s)\n", textsafe.Line(p), mark)
				}
				fmt.Fprintf(g.stdout, "    why: %s; choices: %s\n", textsafe.Line(a.Request.Reason), textsafe.Line(strings.Join(choices(a), ", ")))
				for _, l := range approverui.AllowAlwaysLines(a.Request) {
					fmt.Fprintf(g.stdout, "    allow-always %s\n", approverui.AlwaysText(l))
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "gateway", DefaultGateway, "gateway URL")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func choices(a approvalroute.Requested) []string {
	if len(a.Request.Choices) > 0 {
		return a.Request.Choices
	}
	return []string{string(policy.AllowOnce), string(policy.AllowAlways), string(policy.Reject)}
}

// newApprovalsResolveCmd is `exechost approvals resolve ID DECISION`.
func newApprovalsResolveCmd(g *globals) *cobra.Command {
	var url string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "resolve ID allow-once|allow-always|deny",
		Short: "Answer an exec prompt waiting at the gateway",
		Long: `Answer an exec prompt waiting at the gateway. ID is the prompt's id or
any unique prefix of it (` + "`exechost approvals pending`" + ` lists them). The answer is
recorded as given by this operator in the execution host's audit log.
allow-once runs the command once; allow-always also adds its executables
to the agent's allowlist on that host (refused when the prompt does not
offer it, as with ask=always); deny refuses it.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usagef("resolve needs ID and a decision (allow-once, allow-always or deny)")
			}
			if _, err := policy.ParseApproval(args[1]); err != nil {
				return usagef("decision %q: want allow-once, allow-always or deny", args[1])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var res approvalroute.Resolved
			err := g.call(cmd.Context(), url, approvalroute.MethodResolve, approvalroute.ResolveParams{ID: args[0], Decision: args[1]}, &res)
			if err != nil {
				return fmt.Errorf("resolve approval %s: %w", args[0], err)
			}
			if asJSON {
				return g.printJSON(res)
			}
			fmt.Fprintf(g.stdout, "%s: %s (by %s)\n", res.ID, res.Decision, res.By)
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "gateway", DefaultGateway, "gateway URL")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// routeFlags are `node run`'s approval routing flags. The node has no
// config file, so approvals.route is a flag there; the gateway process
// reads approvals.route from exechost.json.
type routeFlags struct {
	route         string
	promptTimeout time.Duration
}

func (f *routeFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.route, "approvals-route", string(approvalroute.Local),
		"where prompts for a human go: `local|gateway|both` (local: this machine's approver socket; gateway: the gateway's operators, \"exechost approvals pending|resolve\" and its web UI; both: first answer wins)")
	cmd.Flags().DurationVar(&f.promptTimeout, "prompt-timeout", 0,
		"how long a prompt waits for a human before askFallback applies (default 2m)")
}
