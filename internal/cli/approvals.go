package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/explain"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
)

func init() { register("approvals", newApprovalsCmd) }

func newApprovalsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "Inspect and edit this host's exec-approvals.json (policy and allowlists)",
	}
	cmd.AddCommand(newApprovalsGetCmd(g), newApprovalsSetCmd(g), newAllowlistCmd(g), newApprovalsCheckCmd(g), newApprovalsProposeCmd(g), newApprovalsPendingCmd(g), newApprovalsResolveCmd(g))
	return cmd
}

// localStore opens the approvals store in the state directory.
func (g *globals) localStore() (*approvals.Store, string, error) {
	dir, err := g.dir()
	if err != nil {
		return nil, "", err
	}
	return approvals.NewStore(dir), dir, nil
}

// agentView is one agent's effective policy as `approvals get` shows it.
type agentView struct {
	Security    policy.Security           `json:"security"`
	Ask         policy.Ask                `json:"ask"`
	AskFallback policy.Fallback           `json:"askFallback"`
	Sources     map[string]string         `json:"sources"`
	Skipped     []string                  `json:"skipped,omitempty"`
	Allowlist   []approvals.ResolvedEntry `json:"allowlist"`
	Warnings    []string                  `json:"warnings,omitempty"`
	// Confine is what the "confine" members ask for, with sources; nil:
	// the security mode's built-in confinement.
	Confine *approvals.ResolvedConfine `json:"confine,omitempty"`
}

// approvalsView is the output of `approvals get --json`.
type approvalsView struct {
	Path   string               `json:"path"`
	Hash   string               `json:"hash"`
	File   json.RawMessage      `json:"file"`
	Agents map[string]agentView `json:"effective"`
	// UnknownKeys are keys this version ignores (kept on rewrite): a typo
	// such as "allowlst" does nothing, which is worth a loud line.
	UnknownKeys []string `json:"unknownKeys,omitempty"`
	// ExechostOnly are the members an OpenClaw gateway never sees (its
	// closed schema lacks them) and an edit made in OpenClaw keeps.
	ExechostOnly []string `json:"exechostOnly,omitempty"`
}

func buildView(path string, f *approvals.File) (approvalsView, error) {
	raw, err := f.Redacted().Marshal()
	if err != nil {
		return approvalsView{}, err
	}
	v := approvalsView{Path: path, Hash: f.Hash(), File: raw, Agents: map[string]agentView{}, UnknownKeys: explain.UnknownKeys(f), ExechostOnly: approvals.ExechostOnly(f)}
	ids := []string{"*"}
	for id := range f.Agents {
		if id != "*" {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids[1:])
	for _, id := range ids {
		r := f.Resolve(id)
		v.Agents[id] = agentView{
			Security: r.Local.Security, Ask: r.Local.Ask, AskFallback: r.Local.Fallback,
			Sources: r.Sources, Skipped: r.Skipped, Allowlist: r.Allowlist, Warnings: r.Warnings, Confine: r.Confine,
		}
	}
	return v, nil
}

func newApprovalsGetCmd(g *globals) *cobra.Command {
	var asJSON bool
	var node, gateway string
	cmd := &cobra.Command{
		Use:   "get",
		Short: "Show the effective policy per agent, where each value came from, and warnings",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if node != "" {
				return g.remoteApprovalsGet(cmd.Context(), gateway, node, asJSON)
			}
			s, _, err := g.localStore()
			if err != nil {
				return err
			}
			f, err := s.Load()
			if err != nil {
				return err
			}
			v, err := buildView(s.Path, f)
			if err != nil {
				return err
			}
			if asJSON {
				return g.printJSON(v)
			}
			printView(g, v)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&node, "node", "", "show a paired node's approvals (through the gateway)")
	cmd.Flags().StringVar(&gateway, "gateway", DefaultGateway, "gateway URL (with --node)")
	return cmd
}

func printView(g *globals, v approvalsView) {
	w := g.stdout
	fmt.Fprintf(w, "file: %s\n", v.Path)
	for _, k := range v.UnknownKeys {
		fmt.Fprintf(w, "WARNING: unknown key %s is ignored (kept in the file; a typo here does nothing)\n", k)
	}
	if len(v.ExechostOnly) > 0 {
		fmt.Fprintf(w, "exechost-only (an OpenClaw gateway does not see these; its edits keep them): %s\n", strings.Join(v.ExechostOnly, ", "))
	}
	ids := make([]string, 0, len(v.Agents))
	for id := range v.Agents {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] == "*" || (ids[j] != "*" && ids[i] < ids[j]) })
	for _, id := range ids {
		a := v.Agents[id]
		fmt.Fprintf(w, "\nagent %s\n", id)
		fmt.Fprintf(w, "  security     %-10s (from %s)\n", a.Security, a.Sources["security"])
		fmt.Fprintf(w, "  ask          %-10s (from %s)\n", a.Ask, a.Sources["ask"])
		fmt.Fprintf(w, "  askFallback  %-10s (from %s)\n", a.AskFallback, a.Sources["askFallback"])
		printConfine(w, a)
		for _, s := range a.Skipped {
			fmt.Fprintf(w, "  note: %s\n", s)
		}
		if len(a.Allowlist) == 0 {
			fmt.Fprintln(w, "  allowlist    (empty)")
		}
		for _, e := range a.Allowlist {
			origin := ""
			if e.Agent != id {
				origin = "  [from " + e.Agent + "]"
			}
			last := ""
			if e.Entry.LastUsedAt > 0 {
				last = fmt.Sprintf("  last used %s: %s", msTime(e.Entry.LastUsedAt), e.Entry.LastUsedCommand)
			}
			kind, text := e.Describe()
			fmt.Fprintf(w, "  %-12s %s%s%s\n", kind, text, origin, last)
		}
		for _, warn := range a.Warnings {
			fmt.Fprintf(w, "  WARNING: %s\n", warn)
		}
	}
}

func newApprovalsSetCmd(g *globals) *cobra.Command {
	var file, node, gateway, baseHash string
	cmd := &cobra.Command{
		Use:   "set --file F",
		Short: "Replace exec-approvals.json with F (validated; the socket token is kept)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usageHint("`exechost approvals get --json` shows the current file", "set needs --file F")
			}
			data, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("read %s: %w", file, err)
			}
			incoming, err := approvals.Parse(file, data)
			if err != nil {
				return err
			}
			if node != "" {
				if baseHash != "" {
					return g.remoteApprovalsSetBase(cmd.Context(), gateway, node, incoming, baseHash)
				}
				return g.remoteApprovalsSet(cmd.Context(), gateway, node, incoming)
			}
			s, _, err := g.localStore()
			if err != nil {
				return err
			}
			update := s.Update
			if baseHash != "" {
				update = func(fn func(*approvals.File) error) (*approvals.File, error) { return s.UpdateIf(baseHash, fn) }
			}
			written, err := update(func(f *approvals.File) error {
				token := f.Socket.Token
				f.Replace(incoming)
				if f.Socket.Token == "" {
					f.Socket.Token = token
				}
				return nil
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "wrote %s (hash %s)\n", s.Path, written.Hash())
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "the new exec-approvals.json")
	cmd.Flags().StringVar(&node, "node", "", "set a paired node's approvals (through the gateway)")
	cmd.Flags().StringVar(&baseHash, "base-hash", "", "refuse the write unless the file still has this `HASH` (from \"approvals get --json\"): no concurrent edit is lost")
	cmd.Flags().StringVar(&gateway, "gateway", DefaultGateway, "gateway URL (with --node)")
	return cmd
}

func newAllowlistCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "allowlist", Short: "Add or remove allowlist patterns (here, or on a paired node with --node)"}
	var agent, node, gw string
	var yes bool
	mk := func(use, short string, add bool) *cobra.Command {
		c := &cobra.Command{
			Use:   use + " PATTERN",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				pattern := strings.TrimSpace(args[0])
				if add && !policy.CanMatch(pattern) {
					return usagef("refusing to add a pattern that can never match: %s", policy.LintPattern(pattern))
				}
				if add {
					if err := g.confirmAllowlist(cmd.InOrStdin(), pattern, allowlistWarnings(pattern), yes); err != nil {
						return err
					}
				}
				changed := false
				edit := func(f *approvals.File) error {
					if add {
						changed = f.AddPattern(agent, pattern)
					} else {
						changed = f.RemovePattern(agent, pattern)
					}
					return nil
				}
				if node != "" {
					if err := g.remoteApprovalsEdit(cmd.Context(), gw, node, edit); err != nil {
						return err
					}
				} else {
					s, _, err := g.localStore()
					if err != nil {
						return err
					}
					if _, err = s.Update(edit); err != nil {
						return err
					}
				}
				on := ""
				if node != "" {
					on = " on node " + node
				}
				switch {
				case add && changed:
					fmt.Fprintf(g.stdout, "added %s to agent %s%s\n", pattern, agent, on)
				case add:
					fmt.Fprintf(g.stdout, "%s is already in agent %s's allowlist%s\n", pattern, agent, on)
				case changed:
					fmt.Fprintf(g.stdout, "removed %s from agent %s%s\n", pattern, agent, on)
				default:
					return hint.Wrap(fmt.Errorf("pattern %q is not in agent %s's allowlist%s", pattern, agent, on), "`exechost approvals get` lists them")
				}
				return nil
			},
		}
		c.Flags().StringVar(&agent, "agent", "*", "agent `ID` (\"*\" applies to every agent)")
		c.Flags().StringVar(&node, "node", "", "edit a paired `NODE`'s allowlist (through the gateway)")
		c.Flags().StringVar(&gw, "gateway", DefaultGateway, "gateway `URL` (with --node)")
		if add {
			c.Flags().BoolVar(&yes, "yes", false, "add a pattern that can run anything (a shell, an interpreter, a wrapper, a broad glob) without asking; needed when stdin is not a terminal")
		}
		return c
	}
	cmd.AddCommand(mk("add", "Add a path glob to an agent's allowlist", true), mk("remove", "Remove a pattern (or entry id) from an agent's allowlist", false))
	return cmd
}

// checkSegment and checkOutput are the stable JSON of `approvals check`.
type checkSegment struct {
	Argv           []string `json:"argv"`
	ResolvedPath   string   `json:"resolvedPath"`
	RealPath       string   `json:"realPath,omitempty"`
	MatchedPattern string   `json:"matchedPattern"`
	Role           string   `json:"role,omitempty"`
	Via            []string `json:"via,omitempty"`
	// Runs says how the executable starts: "exec PATH", with the wrappers
	// the runner applies, or "started by PROGRAM".
	Runs      string   `json:"runs"`
	Applied   []string `json:"applied,omitempty"`
	StartedBy string   `json:"startedBy,omitempty"`
}

type checkOutput struct {
	Decision           policy.Outcome  `json:"decision"`
	Reason             string          `json:"reason"`
	Security           policy.Security `json:"security"`
	Ask                policy.Ask      `json:"ask"`
	AskFallback        policy.Fallback `json:"askFallback"`
	AnalysisOK         bool            `json:"analysisOk"`
	AnalysisError      string          `json:"analysisError,omitempty"`
	AllowlistSatisfied bool            `json:"allowlistSatisfied"`
	Segments           []checkSegment  `json:"segments"`
	// Canonical is the command as the interpreter runs it (printed from
	// the parsed tree) and CanonicalSha256 what an approval binds; RunsAs
	// says how it would run if allowed; Builtins are the commands the
	// interpreter runs itself ("interpreter builtin").
	Canonical       string   `json:"canonical,omitempty"`
	CanonicalSha256 string   `json:"canonicalSha256,omitempty"`
	RunsAs          string   `json:"runsAs"`
	Builtins        []string `json:"builtins,omitempty"`
	// Confinement says in one line what the run could reach and which
	// layers of the jail hold; Layers lists those layers, Jail is the
	// whole confinement (hidden secrets, read-only paths, sockets).
	Confinement string               `json:"confinement"`
	Layers      []string             `json:"layers"`
	Jail        *confine.Confinement `json:"jail,omitempty"`
	// Rules is the analysis's rule set, "strict" or "contained" (docs/
	// policy.md, "What the walls contain"), RulesWhy why, and Contained
	// the constructs the contained rules allowed.
	Rules     string   `json:"rules"`
	RulesWhy  string   `json:"rulesWhy,omitempty"`
	Contained []string `json:"contained,omitempty"`
}

func newApprovalsCheckCmd(g *globals) *cobra.Command {
	var agent, cwd string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check [--agent ID] [--cwd D] 'COMMAND TEXT'",
		Short: "Say whether this host would allow, ask or deny a command, and why (runs nothing)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := g.dir()
			if err != nil {
				return err
			}
			if cwd == "" {
				if cwd, err = os.Getwd(); err != nil {
					return hint.Wrap(fmt.Errorf("current directory: %w", err), "pass --cwd")
				}
			}
			e := host.NewEngine(dir, policy.HostGateway, "local")
			p, err := e.Prepare(host.Request{RawCommand: args[0], Cwd: cwd, AgentID: agent})
			if err != nil {
				return err
			}
			out := checkOutput{
				Decision: p.Decision.Outcome, Reason: p.Decision.Reason,
				Security: p.Effective.Security, Ask: p.Effective.Ask, AskFallback: p.Effective.Fallback,
				AnalysisOK: p.Analysis.OK, AnalysisError: p.Analysis.Error, AllowlistSatisfied: p.Satisfied,
				Segments: []checkSegment{}, Canonical: p.Analysis.Canonical, CanonicalSha256: p.Analysis.Hash,
				RunsAs: p.RunsAs(), Confinement: e.ConfinementText(p), Layers: e.Layers(p), Jail: e.Jail(p),
				Rules: p.Rules, RulesWhy: p.RulesWhy, Contained: p.Analysis.Contained,
			}
			if out.Layers == nil {
				out.Layers = []string{}
			}
			for _, b := range p.Analysis.Builtins {
				out.Builtins = append(out.Builtins, b.String()) // "name at line:col", the shape --json has always had
			}
			for i, s := range p.Analysis.Segments {
				cs := checkSegment{Argv: s.Argv, ResolvedPath: s.ResolvedPath, RealPath: s.RealPath, Role: string(s.Role), Via: s.Via,
					Runs: s.Runs, Applied: s.Applied, StartedBy: s.StartedBy}
				if i < len(p.Matched) {
					cs.MatchedPattern = p.Matched[i]
				}
				if cs.Argv == nil {
					cs.Argv = []string{}
				}
				out.Segments = append(out.Segments, cs)
			}
			if asJSON {
				enc := json.NewEncoder(g.stdout)
				return enc.Encode(out)
			}
			fmt.Fprintf(g.stdout, "%s: %s\n", out.Decision, out.Reason)
			fmt.Fprintf(g.stdout, "policy: security=%s ask=%s askFallback=%s (agent %s)\n", out.Security, out.Ask, out.AskFallback, p.Agent)
			if !out.AnalysisOK {
				fmt.Fprintf(g.stdout, "analysis failed: %s\n", out.AnalysisError)
			}
			rules := out.Rules
			if out.RulesWhy != "" {
				rules += " (" + out.RulesWhy + ")"
			}
			if len(out.Contained) > 0 {
				rules += "; allowed because the walls hold: " + strings.Join(out.Contained, "; ")
			}
			fmt.Fprintf(g.stdout, "rules: %s\n", rules)
			fmt.Fprintf(g.stdout, "runs as: %s\n", out.RunsAs)
			fmt.Fprintf(g.stdout, "reach: %s\n", out.Confinement)
			for _, b := range out.Builtins {
				fmt.Fprintf(g.stdout, "  %-40s interpreter builtin\n", b)
			}
			for _, s := range out.Segments {
				m := s.MatchedPattern
				if m == "" {
					m = "(no match)"
				}
				path := s.ResolvedPath
				if path == "" {
					path = "(not found)"
				}
				if s.RealPath != "" && s.RealPath != s.ResolvedPath {
					path += " -> " + s.RealPath
				}
				fmt.Fprintf(g.stdout, "  %-40s %s  %s  [%s]\n", strings.Join(s.Argv, " "), path, m, s.Runs)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&agent, "agent", defaultAgent, "agent `ID` whose policy applies (as for exec, run and mcp)")
	cmd.Flags().StringVar(&cwd, "cwd", "", "working directory for resolving ./names (default: the current directory)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// printConfine shows an agent's confinement policy and where each value
// came from (docs/policy.md, "Confinement").
func printConfine(w io.Writer, a agentView) {
	c := a.Confine
	if c == nil {
		fmt.Fprintf(w, "  confine      built-in for security=%s (no \"confine\" member)\n", a.Security)
		return
	}
	writable := "cwd, run temp"
	if len(c.Writable) > 0 {
		writable += ", " + strings.Join(c.Writable, ", ")
	}
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	fmt.Fprintf(w, "  confine      writable: %s (from %s)\n", writable, c.Sources["writable"])
	fmt.Fprintf(w, "               network: %s (from %s)\n", c.NetworkText(), c.Sources["network"])
	fmt.Fprintf(w, "               unsupported: %s (from %s)\n", or(string(c.Unsupported), "deny"), c.Sources["unsupported"])
	list := func(l []string, def string) string {
		if len(l) == 0 {
			return def
		}
		return strings.Join(l, ", ")
	}
	fmt.Fprintf(w, "               sockets: %s (from %s)\n", list(c.Sockets, "none"), c.Sources["sockets"])
	hidden := "the default set"
	if len(c.Hidden) > 0 {
		hidden += " + " + strings.Join(c.Hidden, ", ")
	}
	fmt.Fprintf(w, "               hidden: %s (from %s)\n", hidden, c.Sources["hidden"])
	fmt.Fprintf(w, "               readable: %s (from %s)\n", list(c.Readable, "none"), c.Sources["readable"])
	fmt.Fprintf(w, "               writablePersistence: %s (from %s)\n", list(c.WritablePersistence, "none"), c.Sources["writablePersistence"])
}
