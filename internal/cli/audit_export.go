package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/nodekey"
	"github.com/exechost/exechost/internal/receipt"
)

// newAuditExportCmd is `exechost audit export`: this host's signed run
// receipts as a bundle another machine verifies offline.
func newAuditExportCmd(g *globals) *cobra.Command {
	var agent, since string
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write this host's signed run receipts as a bundle to verify offline",
		Long: `Write <state>/receipts.jsonl (and its rotated files, oldest first) to stdout
as a bundle: a header naming the public keys that signed, then each receipt
exactly as the host wrote it. Receipts a filter leaves out are replaced by
one "elided" line per run of them, so the chain still verifies and the
verifier says what is missing. Check a bundle anywhere with
'exechost audit verify BUNDLE --key HOSTKEY' (docs/audit.md, "Receipts").`,
		Example: `  exechost audit export > receipts.jsonl
  exechost audit export --since 7d --agent main > week.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := g.dir()
			if err != nil {
				return err
			}
			now := time.Now()
			f := receipt.Filter{Agent: agent}
			if since != "" {
				t, err := parseSince(since, now)
				if err != nil {
					return usageError{err}
				}
				f.Since = t
			}
			if len(receipt.Files(dir)) == 0 {
				fmt.Fprintf(g.stderr, "exechost: no receipts in %s yet (a host writes one per finished or refused run)\n", dir)
			}
			return receipt.Export(g.stdout, dir, f, now)
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "only receipts of this agent id (others are elided)")
	cmd.Flags().StringVar(&since, "since", "", "only receipts newer than a duration ago (90m, 36h, 7d) or a time (RFC 3339 or 2006-01-02)")
	return cmd
}

// addBundleVerify makes `audit verify` take bundles: with BUNDLE arguments
// it verifies signed receipts offline instead of this host's audit log.
func addBundleVerify(g *globals, cmd *cobra.Command) {
	var keys []string
	var gateway string
	logVerify := cmd.RunE
	cmd.Use = "verify [BUNDLE…]"
	cmd.Long += `

With BUNDLE files (from 'exechost audit export'; "-" reads stdin) it checks
signed run receipts instead, on any machine, without a state directory:
each receipt's signature against the host key given with --key (or the
node keys a --trust-gateway key countersigned), each host's chain (a gap,
a reorder, a replay, an altered or forged receipt, rotation), and that the
gateway's countersignatures and the nodes' receipts agree. Every problem
names the receipt; exit 1 when there is one.`
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			if len(keys) > 0 || gateway != "" {
				return usagef("--key and --trust-gateway verify a bundle: give the bundle file")
			}
			return logVerify(c, args)
		}
		return g.verifyBundles(c, args, keys, gateway)
	}
	cmd.Flags().StringArrayVar(&keys, "key", nil, "trust receipts signed by this host key (unpadded base64url, as the bundle header and 'exechost gateway' print it); repeatable")
	cmd.Flags().StringVar(&gateway, "trust-gateway", "", "trust this gateway's key and every node key its countersignatures name, and check its view against the nodes'")
}

func (g *globals) verifyBundles(c *cobra.Command, files, keys []string, gateway string) error {
	if len(keys) == 0 && gateway == "" {
		return usagef("give --key HOSTKEY or --trust-gateway KEY: a bundle names its keys, but trusting them is your decision")
	}
	for _, k := range append(append([]string(nil), keys...), gateway) {
		if k == "" {
			continue
		}
		if _, err := nodekey.ParsePublicKey(k); err != nil {
			return usagef("key %q: %v", k, err)
		}
	}
	var readers []io.Reader
	for _, name := range files {
		if name == "-" {
			readers = append(readers, c.InOrStdin())
			continue
		}
		f, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("audit verify: %w", err)
		}
		defer f.Close()
		readers = append(readers, f)
	}
	rep, err := receipt.Verify(io.MultiReader(readers...), receipt.Trust{Keys: keys, Gateway: gateway})
	if err != nil {
		return fmt.Errorf("audit verify: %w", err)
	}
	asJSON, _ := c.Flags().GetBool("json")
	if asJSON {
		if err := g.printJSON(rep); err != nil {
			return err
		}
	} else {
		for _, ch := range rep.Chains {
			fmt.Fprintf(g.stdout, "chain %s (key %s): %d receipts, seq %d-%d\n", ch.Host, ch.HostKey, ch.Receipts, ch.FirstSeq, ch.LastSeq)
		}
		for _, n := range rep.Notes {
			fmt.Fprintf(g.stdout, "note: %s\n", n)
		}
		for _, f := range rep.Findings {
			fmt.Fprintf(g.stdout, "FAIL %s\n", f)
		}
	}
	if !rep.OK() {
		if !asJSON {
			fmt.Fprintf(g.stderr, "exechost: audit verify: %d problem(s) in %s\n", len(rep.Findings), strings.Join(files, ", "))
		}
		return exitError{1}
	}
	if !asJSON {
		fmt.Fprintln(g.stdout, "ok: every receipt signed by a trusted key, chains intact")
	}
	return nil
}
