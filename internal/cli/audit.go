package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/approverui"
	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/state"
	"github.com/exechost/exechost/internal/textsafe"
)

func init() { register("audit", newAuditCmd) }

func newAuditCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Read and verify this host's audit log of exec decisions and outcomes",
		Long: `Read and verify <state>/audit.jsonl, where every execution host on this
machine records each exec decision (allowed, asked, denied, fallbacks, who
approved) and outcome (exit code, timeout, duration), and a gateway each
decision it makes itself (routing refusals, sandbox runs, pairing, relayed
edits and answers), one JSON line each; docs/audit.md lists them. Rotated files (audit.jsonl.1 …) are read too, oldest first.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newAuditTailCmd(g), newAuditSearchCmd(g), newAuditVerifyCmd(g), newAuditExportCmd(g))
	return cmd
}

// auditRecorder opens dir's audit log for this process's recorders (host
// engines and the gateway), or returns nil after a loud warning when it
// cannot: a missing audit log never stops commands from being gated.
// Every failed append is reported on stderr too.
func (g *globals) auditRecorder(dir string) *audit.Recorder {
	return host.OpenAudit(dir, func(err error) { fmt.Fprintf(g.stderr, "exechost: WARNING: %v\n", err) })
}

// auditPath returns the audit log's path in the state directory.
func (g *globals) auditPath() (string, error) {
	dir, err := g.dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, state.AuditFile), nil
}

// auditFilterFlags are the filter flags tail and search share.
type auditFilterFlags struct {
	agent, since, decision string
}

func (f *auditFilterFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.agent, "agent", "", "only records of this agent id")
	cmd.Flags().StringVar(&f.since, "since", "", "only records newer than a duration ago (90m, 36h, 7d) or a time (RFC 3339 or 2006-01-02)")
	cmd.Flags().StringVar(&f.decision, "decision", "", "only records with this decision: allow, ask or deny")
}

func (f *auditFilterFlags) filter(now time.Time, text string) (audit.Filter, error) {
	out := audit.Filter{Agent: f.agent, Text: text}
	switch d := strings.ToLower(f.decision); d {
	case "", audit.DecisionAllow, audit.DecisionAsk, audit.DecisionDeny:
		out.Decision = d
	default:
		return out, usagef("--decision %q: want allow, ask or deny", f.decision)
	}
	if f.since != "" {
		t, err := parseSince(f.since, now)
		if err != nil {
			return out, usageError{err}
		}
		out.Since = t
	}
	return out, nil
}

// parseSince reads --since: a duration before now (Go syntax plus a "d"
// suffix for days), an RFC 3339 time, or a date (local midnight).
func parseSince(s string, now time.Time) (time.Time, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.ParseFloat(days, 64); err == nil && n >= 0 {
			return now.Add(-time.Duration(n * 24 * float64(time.Hour))), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation(time.DateOnly, s, time.Local); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--since %q: not a duration (90m, 36h, 7d), an RFC 3339 time or a date (2006-01-02)", s)
}

func newAuditTailCmd(g *globals) *cobra.Command {
	var (
		n       int
		follow  bool
		asJSON  bool
		filters auditFilterFlags
	)
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Print the last records of the audit log (and follow new ones with --follow)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if n < 0 {
				return usagef("-n %d: must not be negative", n)
			}
			f, err := filters.filter(time.Now(), "")
			if err != nil {
				return err
			}
			path, err := g.auditPath()
			if err != nil {
				return err
			}
			names := newNodeNamer(filepath.Dir(path))
			// Fix the follow position before reading, so nothing
			// appended in between is lost; records seen by both are
			// printed once (recognised by their hash).
			var fw *audit.Follower
			startedAt := time.Now()
			if follow {
				if fw, err = audit.NewFollower(path, f); err != nil {
					return err
				}
				defer fw.Close()
			}
			ring := make([]audit.Record, 0, n)
			recent := map[string]bool{} // hashes that Follow may report again
			readErr := audit.Read(path, f, func(r audit.Record) error {
				if follow && r.Time.After(startedAt.Add(-time.Minute)) {
					recent[r.Hash] = true
				}
				if n == 0 {
					return nil
				}
				if len(ring) == n {
					ring = append(ring[:0], ring[1:]...)
				}
				ring = append(ring, r)
				return nil
			})
			var le *audit.LineError
			switch {
			case readErr == nil, errors.As(readErr, &le):
				// Print what was read; a bad line is reported after.
			case follow && errors.Is(readErr, os.ErrNotExist):
				readErr = nil // nothing audited yet: wait for the first record
			default:
				return readErr
			}
			for _, r := range ring {
				if err := printRecord(g.stdout, r, asJSON, names); err != nil {
					return err
				}
			}
			if !follow {
				return readErr
			}
			if readErr != nil {
				fmt.Fprintln(g.stderr, "exechost: warning:", readErr)
			}
			ctx, stop := signal.NotifyContext(cmdContext(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return fw.Run(ctx, 500*time.Millisecond, func(r audit.Record) error {
				if recent[r.Hash] {
					return nil
				}
				return printRecord(g.stdout, r, asJSON, names)
			})
		},
	}
	cmd.Flags().IntVarP(&n, "lines", "n", 20, "how many records to print")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing records as they are appended (Ctrl-C to stop)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each record as one JSON line, as stored")
	filters.add(cmd)
	return cmd
}

func newAuditSearchCmd(g *globals) *cobra.Command {
	var (
		asJSON  bool
		filters auditFilterFlags
	)
	cmd := &cobra.Command{
		Use:   "search [TEXT]",
		Short: "Print the audit records that match filters and an optional text",
		Long: `Print the audit records that match every given filter, oldest first.
TEXT matches case-insensitively anywhere in the command, argv, cwd, resolved
paths, reason, decider, run id, session key or node id.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			text := ""
			if len(args) == 1 {
				text = args[0]
			}
			f, err := filters.filter(time.Now(), text)
			if err != nil {
				return err
			}
			path, err := g.auditPath()
			if err != nil {
				return err
			}
			names := newNodeNamer(filepath.Dir(path))
			return audit.Read(path, f, func(r audit.Record) error { return printRecord(g.stdout, r, asJSON, names) })
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each record as one JSON line, as stored")
	filters.add(cmd)
	return cmd
}

// verifyResult is `audit verify --json`.
type verifyResult struct {
	OK    bool   `json:"ok"`
	Lines int    `json:"lines"`
	File  string `json:"file,omitempty"`
	Line  int    `json:"line,omitempty"`
	Error string `json:"error,omitempty"`
	// Rotation says what rotation removed and kept (audit.RotationReport).
	Rotation string `json:"rotation,omitempty"`
}

func newAuditVerifyCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check the audit log's hash chain: no line edited, removed, inserted or reordered",
		Long: `Check the hash chain of the audit log across all rotated files. Exit 0 when
every line is intact; otherwise exit 1 and name the first bad line
(file:line). The chain cannot reveal lines cut from the very end or rotated
files removed from the oldest end.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := g.auditPath()
			if err != nil {
				return err
			}
			n, verr := audit.Verify(path)
			rot, rerr := audit.RotationReport(path) // what rotation removed and kept
			if verr == nil {
				verr = rerr
			}
			res := verifyResult{OK: verr == nil, Lines: n, Rotation: rot}
			var le *audit.LineError
			if errors.As(verr, &le) {
				res.File, res.Line = le.File, le.Line
			}
			if verr != nil {
				res.Error = verr.Error()
			}
			if asJSON {
				if err := g.printJSON(res); err != nil {
					return err
				}
				if verr != nil {
					return exitError{1}
				}
				return nil
			}
			if verr != nil {
				return fmt.Errorf("audit verify: %w (%d lines intact before it)", verr, n)
			}
			fmt.Fprintf(g.stdout, "ok: %d lines, hash chain intact\n", n)
			if rot != "" {
				fmt.Fprintln(g.stdout, rot)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	addBundleVerify(g, cmd) // BUNDLE arguments: signed receipts (audit_export.go)
	return cmd
}

// cmdContext returns the command's context, or Background when run
// without one (tests calling Execute).
func cmdContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// printRecord prints r as one JSON line (as stored) or one readable line.
// A node is named as the state directory knows it (names).
func printRecord(w io.Writer, r audit.Record, asJSON bool, names *nodeNamer) error {
	if asJSON {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintln(w, formatRecord(r, names.name(r.NodeID)))
	return err
}

// formatRecord renders r on one line for people:
//
//	2026-01-02 03:04:05  denied   deny  node/n1 agent=main run=r1 by=askFallback (fallback)  "rm -rf /"  reason: …
//
// name is the node's display name, when known ("" otherwise).
func formatRecord(r audit.Record, name string) string {
	var b strings.Builder
	b.WriteString(r.Time.Local().Format(time.DateTime))
	fmt.Fprintf(&b, "  %-8s %-5s", r.Event, orDash(r.Decision))
	host := orDash(r.Host)
	if r.NodeID != "" {
		host += "/" + NodeLabel(name, r.NodeID) // the name, and 8 digits of a key's id: --node takes either
	}
	fmt.Fprintf(&b, " %s", textsafe.Line(host))
	for _, kv := range [][2]string{{"action", r.Action}, {"actor", r.Actor}, {"agent", r.AgentID}, {"run", r.RunID}, {"by", r.DecidedBy}, {"approval", r.Approval}, {"backend", r.Backend}} {
		if kv[1] != "" {
			fmt.Fprintf(&b, " %s=%s", kv[0], textsafe.Line(kv[1]))
		}
	}
	if r.Fallback {
		b.WriteString(" (fallback)")
	}
	if r.ExitCode != nil {
		fmt.Fprintf(&b, " code=%d", *r.ExitCode)
	}
	if r.TimedOut {
		b.WriteString(" timed-out")
	}
	if r.Truncated {
		b.WriteString(" truncated")
	}
	if r.DurationMs > 0 || r.Event == audit.EventFinished {
		fmt.Fprintf(&b, " %s", (time.Duration(r.DurationMs) * time.Millisecond).String())
	}
	cmd := r.Command
	if cmd == "" && len(r.Argv) > 0 {
		cmd = strings.Join(r.Argv, " ")
	}
	if cmd != "" {
		fmt.Fprintf(&b, "  %s", strconv.Quote(cmd))
	}
	if r.Reason != "" {
		fmt.Fprintf(&b, "  reason: %s", textsafe.Line(r.Reason))
	}
	if r.Error != "" {
		fmt.Fprintf(&b, "  error: %s", textsafe.Line(r.Error))
	}
	if r.Change != "" {
		fmt.Fprintf(&b, "  change: %s", textsafe.Line(r.Change))
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// nodeNamer gives audit lines node names: those the state directory
// knows (approverui.NodeNames: this machine's node, a gateway's paired
// nodes), read again once when an id is not among them, for a node
// paired while `audit tail -f` runs.
type nodeNamer struct {
	dir   string
	names map[string]string
	tried map[string]bool
}

func newNodeNamer(dir string) *nodeNamer {
	return &nodeNamer{dir: dir, names: approverui.NodeNames(dir), tried: map[string]bool{}}
}

// name returns id's display name, or "".
func (n *nodeNamer) name(id string) string {
	if n == nil || id == "" || id == "gateway" {
		return ""
	}
	if name, ok := n.names[id]; ok || n.tried[id] {
		return name
	}
	n.tried[id] = true
	n.names = approverui.NodeNames(n.dir)
	return n.names[id]
}
