package main

import (
	"github.com/spf13/cobra"
)

// newCompletionCmd prints a shell completion script. It replaces cobra's
// default command so the supported shells and the install hints are ours.
func newCompletionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script",
		Long: `Print a shell completion script to stdout. For example:

  bash:  source <(eosctl completion bash)
  zsh:   eosctl completion zsh > "${fpath[1]}/_eosctl"
  fish:  eosctl completion fish > ~/.config/fish/completions/eosctl.fish`,
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args:      usageArgs(cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs)),
		// The script must not depend on reaching a broker or on flags.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			root := cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			default:
				return root.GenFishCompletion(out, true)
			}
		},
	}
}
