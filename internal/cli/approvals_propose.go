package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/shellcmd"
)

// maxProposeExamples bounds the examples a proposed rule carries.
const maxProposeExamples = 3

// proposal is one rule propose suggests: for agent, the program at path,
// with args (nil: the path alone) and the argvs a human approved.
type proposal struct {
	agent, path string
	args        []string
	examples    []string
}

// proposeRun is the audit log's human answers for one program of one
// agent: the argvs approved and those denied.
type proposeRun struct {
	approved, denied [][]string
}

func newApprovalsProposeCmd(g *globals) *cobra.Command {
	var since string
	var apply bool
	cmd := &cobra.Command{
		Use:   "propose [--since 24h] [--apply]",
		Short: "Propose the smallest allowlist rules that would have allowed what humans approved (never what they denied)",
		Long: `Reads the audit log's prompts (records a human answered) and prints
exec-approvals.json with the smallest rules added that would have allowed the
programs humans approved without a prompt: one entry per program, limited to
its first argument when every approved run shares it, with the approved
command lines as examples. A program a human denied in the same window gets no
rule that would allow the denied command line. Shells, interpreters, wrappers
and privilege changers are never proposed. The output is a whole file that
"exechost approvals set --file" accepts; --apply writes it after printing the
entries it adds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := g.dir()
			if err != nil {
				return err
			}
			cutoff, err := parseSince(since, time.Now())
			if err != nil {
				return usageError{err}
			}
			path, err := g.auditPath()
			if err != nil {
				return err
			}
			e := host.NewEngine(dir, policy.HostGateway, "local")
			defer func() { _ = e.Close() }()
			runs, notes, err := readAnswers(e, path, cutoff)
			if err != nil {
				return err
			}
			props, more := proposeRules(runs)
			notes = append(notes, more...)
			s := approvals.NewStore(dir)
			f, err := s.Load()
			if err != nil {
				return err
			}
			addProposals(f, props)
			for _, n := range notes {
				fmt.Fprintf(g.stderr, "note: %s\n", n)
			}
			if !apply {
				// The approver's socket and token stay out of the output
				// (set keeps the file's own when the input has none).
				f.Socket = approvals.Socket{}
				b, err := f.Marshal()
				if err != nil {
					return err
				}
				_, err = g.stdout.Write(append(b, '\n'))
				return err
			}
			printProposals(g.stdout, props)
			if len(props) == 0 {
				return nil
			}
			_, err = s.Update(func(cur *approvals.File) error { addProposals(cur, props); return nil })
			if err == nil {
				fmt.Fprintf(g.stdout, "wrote %s\n", s.Path)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&since, "since", "24h", "only answers newer than a duration ago (90m, 36h, 7d) or a time (RFC 3339 or 2006-01-02)")
	cmd.Flags().BoolVar(&apply, "apply", false, "add the proposed entries to exec-approvals.json after printing them")
	return cmd
}

// readAnswers collects, per agent and program, the argvs humans approved
// and denied since cutoff: each answered record's command is decided again
// under the current policy, and only the segments no entry allows yet, of
// programs allow-always may record (shellcmd.Recordable), count.
func readAnswers(e *host.Engine, path string, cutoff time.Time) (map[[2]string]*proposeRun, []string, error) {
	runs := map[[2]string]*proposeRun{}
	var notes []string
	err := audit.Read(path, audit.Filter{Since: cutoff}, func(r audit.Record) error {
		var approved bool
		switch r.Approval {
		case "allow-once", "allow-always":
			approved = true
		case "deny":
		default:
			return nil
		}
		req := host.Request{RawCommand: r.Command, Argv: r.Argv, Cwd: r.Cwd, AgentID: r.AgentID}
		p, err := e.Prepare(req)
		if err != nil {
			notes = append(notes, fmt.Sprintf("%q: %v", r.Command, err))
			return nil
		}
		if !p.Analysis.OK {
			if approved {
				notes = append(notes, fmt.Sprintf("%q: no rule can allow it: %s", p.Text, p.Analysis.Error))
			}
			return nil
		}
		recordable, _ := shellcmd.Recordable(p.Analysis)
		for i, seg := range p.Analysis.Segments {
			if !slices.Contains(recordable, seg.ResolvedPath) || slices.Contains(seg.Dynamic, true) {
				continue
			}
			if approved && i < len(p.Matched) && p.Matched[i] != "" {
				continue // already allowed
			}
			k := [2]string{p.Agent, seg.ResolvedPath}
			if runs[k] == nil {
				runs[k] = &proposeRun{}
			}
			if approved {
				runs[k].approved = append(runs[k].approved, seg.Argv)
			} else {
				runs[k].denied = append(runs[k].denied, seg.Argv)
			}
		}
		return nil
	})
	var le *audit.LineError
	if errors.As(err, &le) {
		notes = append(notes, fmt.Sprintf("the audit log has a bad line (run `exechost audit verify`): %v", err))
		err = nil
	}
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	return runs, notes, err
}

// proposeRules turns the answers into the smallest rules: the program's
// first argument and anything after it when every approved argv shares
// that first argument, else the path alone; a rule that would allow a
// denied argv is narrowed to the exact approved argvs, and dropped (with a
// note) when even those were denied.
func proposeRules(runs map[[2]string]*proposeRun) ([]proposal, []string) {
	var out []proposal
	var notes []string
	keys := make([][2]string, 0, len(runs))
	for k := range runs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+"\x00"+keys[i][1] < keys[j][0]+"\x00"+keys[j][1] })
	for _, k := range keys {
		r := runs[k]
		if len(r.approved) == 0 {
			continue
		}
		allows := func(args []string) bool {
			for _, d := range r.denied {
				rule := policy.ArgRule{Pattern: k[1], Args: args}
				if args == nil || rule.Matches(k[1], d[1:], nil, "") {
					return true
				}
			}
			return false
		}
		var cands [][]string
		if first := sharedFirst(r.approved); first != "" {
			cands = append(cands, []string{first, "**"})
		} else if len(r.denied) == 0 {
			cands = append(cands, nil)
		}
		picked := false
		for _, args := range cands {
			if len(r.denied) == 0 || !allows(args) {
				out = append(out, proposal{agent: k[0], path: k[1], args: args, examples: examples(r.approved)})
				picked = true
				break
			}
		}
		if picked {
			continue
		}
		for _, a := range uniqueArgvs(r.approved) {
			if len(a) < 2 || allows(a[1:]) {
				notes = append(notes, fmt.Sprintf("%s (agent %s): %q was approved and denied; no rule proposed for it", k[1], k[0], strings.Join(a, " ")))
				continue
			}
			out = append(out, proposal{agent: k[0], path: k[1], args: slices.Clone(a[1:]), examples: examples([][]string{a})})
		}
	}
	return out, notes
}

// sharedFirst is the first argument every argv shares when it is a plain
// word (not an option, no glob character), else "".
func sharedFirst(argvs [][]string) string {
	first := ""
	for i, a := range argvs {
		if len(a) < 2 || strings.HasPrefix(a[1], "-") || strings.ContainsAny(a[1], "*?") {
			return ""
		}
		if i == 0 {
			first = a[1]
		} else if a[1] != first {
			return ""
		}
	}
	return first
}

func uniqueArgvs(argvs [][]string) [][]string {
	var out [][]string
	for _, a := range argvs {
		if !slices.ContainsFunc(out, func(b []string) bool { return slices.Equal(a, b) }) {
			out = append(out, a)
		}
	}
	return out
}

// examples are up to maxProposeExamples approved command lines whose words
// survive splitting on spaces (an example is read as fields), program name
// first as written.
func examples(argvs [][]string) []string {
	var out []string
	for _, a := range uniqueArgvs(argvs) {
		if len(out) == maxProposeExamples {
			break
		}
		if slices.ContainsFunc(a, func(w string) bool { return w == "" || strings.ContainsAny(w, " \t\n*?") }) {
			continue
		}
		out = append(out, strings.Join(a, " "))
	}
	return out
}

// addProposals appends the proposals to f: an argument rule with its
// examples, or a pattern on the path alone (which carries none).
func addProposals(f *approvals.File, props []proposal) {
	for _, p := range props {
		if p.args == nil {
			f.AddPattern(p.agent, p.path)
			continue
		}
		if f.Agents == nil {
			f.Agents = map[string]*approvals.Agent{}
		}
		a := f.Agents[p.agent]
		if a == nil {
			a = &approvals.Agent{}
			f.Agents[p.agent] = a
		}
		a.Allowlist = append(a.Allowlist, approvals.Entry{Pattern: p.path, Args: p.args, Examples: p.examples})
	}
}

// printProposals prints the entries --apply adds, as a diff.
func printProposals(w io.Writer, props []proposal) {
	if len(props) == 0 {
		fmt.Fprintln(w, "nothing to propose: no program a human approved lacks a rule")
		return
	}
	for _, p := range props {
		line := fmt.Sprintf("+ agents[%q].allowlist: {\"pattern\": %q", p.agent, p.path)
		if p.args != nil {
			line += fmt.Sprintf(", \"args\": %q, \"examples\": %q", p.args, p.examples)
		}
		fmt.Fprintln(w, line+"}")
		if p.args == nil && len(p.examples) > 0 {
			fmt.Fprintf(w, "  (approved: %s)\n", strings.Join(p.examples, "; "))
		}
	}
}
