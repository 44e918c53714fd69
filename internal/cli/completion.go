package cli

import (
	"github.com/spf13/cobra"
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
