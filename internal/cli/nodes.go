package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/config"
	"github.com/exechost/exechost/internal/state"
)

func init() { register("nodes", newNodesCmd) }

func newNodesCmd(g *globals) *cobra.Command {
	var url string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "nodes",
		Short: "List, approve, reject and remove paired nodes (through the gateway)",
	}
	cmd.PersistentFlags().StringVar(&url, "gateway", DefaultGateway, "gateway URL")
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print JSON")

	list := func(use, short, method string) *cobra.Command {
		return &cobra.Command{
			Use:   use,
			Short: short,
			Args:  cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				var res bridge.NodesResult
				if err := g.call(c.Context(), url, method, nil, &res); err != nil {
					return err
				}
				if asJSON {
					return g.printJSON(res)
				}
				printNodes(g, res.Nodes, method == bridge.MethodNodesPending)
				return nil
			},
		}
	}
	one := func(use, short, method, verb string) *cobra.Command {
		return &cobra.Command{
			Use:   use + " ID",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, args []string) error {
				var res bridge.NodeView
				if err := g.call(c.Context(), url, method, bridge.NodeIDParams{NodeID: args[0]}, &res); err != nil {
					return err
				}
				if asJSON {
					return g.printJSON(res)
				}
				name := res.NodeID
				if res.DisplayName != "" {
					name += " (" + res.DisplayName + ")"
				}
				if res.Fingerprint != "" {
					name += ", key fingerprint " + res.Fingerprint
				}
				fmt.Fprintf(g.stdout, "%s %s\n", verb, name)
				if method == bridge.MethodNodesApprove {
					g.pairingNote(c.Context(), url)
				}
				return nil
			},
		}
	}
	cmd.AddCommand(
		list("list", "List paired nodes", bridge.MethodNodesList),
		list("pending", "List nodes waiting for approval", bridge.MethodNodesPending),
		one("approve", "Pair a pending node (it receives its token)", bridge.MethodNodesApprove, "approved"),
		one("reject", "Refuse a pending node's pairing request", bridge.MethodNodesReject, "rejected"),
		one("remove", "Unpair a node: its token is revoked and it is disconnected at once", bridge.MethodNodesRemove, "removed"),
	)
	return cmd
}

func printNodes(g *globals, nodes []bridge.NodeView, pending bool) {
	if len(nodes) == 0 {
		if pending {
			fmt.Fprintln(g.stdout, "no pending nodes")
		} else {
			fmt.Fprintln(g.stdout, "no paired nodes (hint: `exechost node run --gateway URL` on the node, then `exechost nodes approve ID`)")
		}
		return
	}
	// Ids derived from keys are 64 hex digits; the column fits the
	// longest so an operator can copy the exact id.
	w := len("NODE ID")
	for _, n := range nodes {
		w = max(w, len(n.NodeID))
	}
	fmt.Fprintf(g.stdout, "%-*s %-19s %-20s %-16s %-14s %-12s %s\n", w, "NODE ID", "KEY FINGERPRINT", "NAME", "REMOTE IP", "PLATFORM", "STATE", "LAST SEEN")
	for _, n := range nodes {
		st := "disconnected"
		switch {
		case pending:
			st = "pending"
		case n.Connected:
			st = "connected"
		}
		seen := "-"
		if n.LastSeen > 0 {
			seen = time.UnixMilli(n.LastSeen).Format(time.DateTime)
		}
		fp := n.Fingerprint
		if fp == "" {
			fp = "-" // paired before keys existed; bound on its next connect
		}
		fmt.Fprintf(g.stdout, "%-*s %-19s %-20s %-16s %-14s %-12s %s\n", w, n.NodeID, fp, trunc(n.DisplayName, 20), n.RemoteIP, n.Platform, st, seen)
	}
	if pending {
		fmt.Fprintf(g.stdout, "\ncompare the key fingerprint with the one the node prints, then approve with: exechost nodes approve %s\n", nodes[0].NodeID)
	}
}

func trunc(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// pairingNote tells stderr what pairing one more node changes for an exec
// that names no node: with several nodes paired it needs a node, unless
// exechost.json (this state directory's, which is the gateway's when it
// runs here) names a default node or a binding.
func (g *globals) pairingNote(ctx context.Context, url string) {
	dir, err := g.dir()
	if err != nil {
		return
	}
	path := filepath.Join(dir, state.ConfigFile)
	cfg, err := config.Load(path, true)
	if err != nil {
		return
	}
	switch {
	case cfg.Tools.Exec.Node != "":
		fmt.Fprintf(g.stderr, "note: agents stay bound to node %s by tools.exec.node in %s; a request for another node is denied until that binding changes\n", g.nodeLabel(ctx, url, cfg.Tools.Exec.Node), path)
	case cfg.Tools.Exec.DefaultNode != "":
		fmt.Fprintf(g.stderr, "note: an exec without --node keeps going to node %s (tools.exec.defaultNode in %s); reach the new node with --node NAME\n", g.nodeLabel(ctx, url, cfg.Tools.Exec.DefaultNode), path)
	default:
		fmt.Fprintf(g.stderr, "note: with more than one node paired, an exec without --node fails with NODE_REQUIRED: pass --node NAME, or set tools.exec.defaultNode in %s\n", path)
	}
}

// nodeLabel names a node for a person: "NAME (3f2a9c01…)" when the
// gateway at url knows q (an id or name) by a display name, else q with a
// 64-hex id shortened. A gateway that does not answer costs nothing but
// the name.
func (g *globals) nodeLabel(ctx context.Context, url, q string) string {
	var res bridge.NodesResult
	if err := g.call(ctx, url, bridge.MethodNodesList, nil, &res); err == nil {
		for _, n := range res.Nodes {
			if n.NodeID == q || n.DisplayName == q {
				return NodeLabel(n.DisplayName, n.NodeID)
			}
		}
	}
	return NodeLabel("", q)
}

// NodeLabel is how a person reads a node: its display name with the
// first 8 characters of its id, or the shortened id alone. Ids of 64 hex
// digits are keys' hashes: nobody reads or types them.
func NodeLabel(name, id string) string {
	short := id
	if len(id) > 12 {
		short = id[:8] + "…"
	}
	if name == "" || name == id {
		return short
	}
	return fmt.Sprintf("%s (%s)", name, short)
}
