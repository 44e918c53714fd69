package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/config"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/sandbox/pick"
	"github.com/exechost/exechost/internal/state"
)

func init() { register("sandbox", newSandboxCmd) }

func newSandboxCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Inspect the sandbox backends (host=sandbox)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newSandboxDoctorCmd(g))
	return cmd
}

func newSandboxDoctorCmd(g *globals) *cobra.Command {
	var cfgPath string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Tell which sandbox backends work on this machine, and why not",
		Long: `Check each sandbox backend with the "sandbox" settings of exechost.json:
docker (is a daemon answering, is the image there) and the daemonless bwrap
backend (does a probe sandbox come up on this kernel, what isolation did it
get: namespaces, Landlock, limits). It changes nothing: no container is
created or removed. For each backend it says how commands run: through
a resident agent inside the sandbox (a static exechost, or a dynamically
linked one started through its own loader and libraries, carried in) or
one runtime call each (docker exec), and why; --json has it as "commands".

Exits 0 when the configured backend (or, for "auto", any backend) works,
1 when host=sandbox would fail.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := g.dir()
			if err != nil {
				return err
			}
			explicit := cfgPath != ""
			if !explicit {
				cfgPath = filepath.Join(dir, state.ConfigFile)
			}
			cfg, err := config.Load(cfgPath, !explicit)
			if err != nil {
				return err
			}
			d, err := pick.Diagnose(cmd.Context(), cfg.Sandbox, dir)
			if err != nil {
				return err
			}
			if asJSON {
				if err := g.printJSON(d); err != nil {
					return err
				}
			} else {
				printDiagnosis(g, d)
			}
			if d.Selected == "" {
				if asJSON {
					return exitError{code: 1}
				}
				return hint.Wrap(errors.New("no sandbox backend works here: host=sandbox commands will fail"), "see the reasons above")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "config file (default <state>/exechost.json; optional there)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the diagnosis as JSON")
	return cmd
}

func printDiagnosis(g *globals, d pick.Diagnosis) {
	sel := d.Selected
	if sel == "" {
		sel = "none"
	}
	fmt.Fprintf(g.stdout, "sandbox.backend: %s (would use: %s)\n", d.Configured, sel)
	for _, s := range d.Backends {
		state := "unavailable"
		if s.Available {
			state = "available"
		}
		fmt.Fprintf(g.stdout, "\n%s: %s: %s\n", s.Name, state, s.Detail)
		said := false
		for _, line := range s.Isolation {
			fmt.Fprintf(g.stdout, "  - %s\n", line)
			said = said || strings.HasPrefix(line, "commands:")
		}
		if s.Commands != nil && !said {
			// How commands would run once the backend is available.
			fmt.Fprintf(g.stdout, "  - commands: %s\n", s.Commands)
		}
	}
}
