package cli

import (
	"context"
	"io"
	"path/filepath"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/config"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/state"
)

func init() { register("completion", newCompletionCmd) }

// newCompletionCmd replaces cobra's default completion command (cobra adds
// none when one named "completion" exists) so its help matches ours.
func newCompletionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print a shell completion script",
		Long: `Print a completion script for your shell. For example:

  bash:        source <(exechost completion bash)
               (or save it to /etc/bash_completion.d/exechost)
  zsh:         exechost completion zsh > "${fpath[1]}/_exechost"
  fish:        exechost completion fish > ~/.config/fish/completions/exechost.fish
  powershell:  exechost completion powershell | Out-String | Invoke-Expression`,
		ValidArgs:             []string{"bash", "zsh", "fish", "powershell"},
		DisableFlagsInUseLine: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("completion: want one shell: bash, zsh, fish or powershell")
			}
			if err := cobra.OnlyValidArgs(cmd, args); err != nil {
				return usagef("completion: %v (want bash, zsh, fish or powershell)", err)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			switch args[0] {
			case "bash":
				if _, err := io.WriteString(g.stdout, bashWordsShim); err != nil {
					return err
				}
				return root.GenBashCompletionV2(g.stdout, true)
			case "zsh":
				return root.GenZshCompletion(g.stdout)
			case "fish":
				return root.GenFishCompletion(g.stdout, true)
			default:
				return root.GenPowerShellCompletionWithDesc(g.stdout)
			}
		},
	}
}

// bashWordsShim defines _get_comp_words_by_ref when the bash-completion
// package does not: cobra's bash script calls it, and without it every Tab
// printed "_get_comp_words_by_ref: command not found". It splits the line
// as bash did (COMP_WORDS) and joins back the words that -n's characters
// (cobra passes "=:") split off, so --host=sandbox stays one word.
const bashWordsShim = `# exechost: a stand-in for bash-completion's _get_comp_words_by_ref, used
# only when that package is not installed.
if ! declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
_get_comp_words_by_ref() {
    local __x="" __i __w __p __cw=0
    local -a __ws=()
    while [[ $1 == -* ]]; do
        case $1 in
            -n) __x=$2; shift 2 ;;
            *) shift ;;
        esac
    done
    for ((__i = 0; __i < ${#COMP_WORDS[@]}; __i++)); do
        __w=${COMP_WORDS[__i]}
        __p=""
        ((__i > 0)) && __p=${COMP_WORDS[__i-1]}
        if ((__i > 1)) && [[ -n $__x ]] && { [[ -n $__w && -z ${__w//[$__x]/} ]] || [[ -n $__p && -z ${__p//[$__x]/} ]]; }; then
            __ws[${#__ws[@]}-1]+=$__w
        else
            __ws+=("$__w")
        fi
        ((__i == COMP_CWORD)) && __cw=$((${#__ws[@]} - 1))
    done
    while [[ $# -gt 0 ]]; do
        case $1 in
            cur) cur=${__ws[__cw]} ;;
            prev) prev=${__ws[__cw-1]} ;;
            words) words=("${__ws[@]}") ;;
            cword) cword=$__cw ;;
        esac
        shift
    done
}
fi
`

// valueCompletionTimeout bounds asking the gateway for node names while
// the user waits on Tab.
const valueCompletionTimeout = 2 * time.Second

// addValueCompletions completes the values of the flags every command
// shares by name, wherever they appear: --host, --security and --ask from
// their enums, --agent from this state directory's exechost.json and
// exec-approvals.json, --node from the gateway's nodes (names, falling
// back to nothing when no gateway answers). None completes file names.
func addValueCompletions(g *globals, root *cobra.Command) {
	fixed := func(vals ...string) cobra.CompletionFunc {
		return cobra.FixedCompletions(vals, cobra.ShellCompDirectiveNoFileComp)
	}
	funcs := map[string]cobra.CompletionFunc{
		"host":     fixed(string(policy.HostSandbox)+"\trun in the sandbox", string(policy.HostGateway)+"\trun on the gateway host", string(policy.HostNode)+"\trun on a paired node"),
		"security": fixed(string(policy.SecurityDeny)+"\trun nothing", string(policy.SecurityAllowlist)+"\tonly what the allowlist allows", string(policy.SecurityFull)+"\tanything"),
		"ask":      fixed(string(policy.AskOff)+"\tnever ask; a miss is denied", string(policy.AskOnMiss)+"\task when the allowlist misses", string(policy.AskAlways)+"\task every time"),
		"agent": func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return g.agentNames(), cobra.ShellCompDirectiveNoFileComp
		},
		"node": func(cmd *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			url := DefaultGateway
			if f := cmd.Flags().Lookup("gateway"); f != nil {
				url = f.Value.String()
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), valueCompletionTimeout)
			defer cancel()
			var res bridge.NodesResult
			if err := g.call(ctx, url, bridge.MethodNodesList, nil, &res); err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []cobra.Completion
			for _, n := range res.Nodes {
				name := n.DisplayName
				if name == "" {
					name = n.NodeID
				}
				out = append(out, cobra.CompletionWithDesc(name, NodeLabel("", n.NodeID)+" "+map[bool]string{true: "connected", false: "disconnected"}[n.Connected]))
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for name, fn := range funcs {
			if c.Flags().Lookup(name) != nil {
				_ = c.RegisterFlagCompletionFunc(name, fn)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// agentNames are the agent ids this state directory knows: exechost.json's
// agents.list, exec-approvals.json's agents (with "*"), and "main".
func (g *globals) agentNames() []cobra.Completion {
	seen := map[string]bool{defaultAgent: true}
	out := []cobra.Completion{defaultAgent}
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	dir, err := g.dir()
	if err != nil {
		return out
	}
	if cfg, err := config.Load(filepath.Join(dir, state.ConfigFile), true); err == nil {
		for _, a := range cfg.Agents.List {
			add(a.ID)
		}
	}
	if f, err := approvals.NewStore(dir).Load(); err == nil {
		ids := make([]string, 0, len(f.Agents))
		for id := range f.Agents {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			add(id)
		}
	}
	return out
}
