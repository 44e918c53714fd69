package cli

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/service"
	"github.com/exechost/exechost/internal/state"
)

// serviceCommands returns the install, uninstall and status subcommands
// for a daemon kind (service.KindNode or service.KindGateway). The node and
// gateway command files attach them:
//
//	cmd.AddCommand(serviceCommands(g, service.KindNode)...)
func serviceCommands(g *globals, kind string) []*cobra.Command {
	return []*cobra.Command{newServiceInstallCmd(g, kind), newServiceUninstallCmd(g, kind), newServiceStatusCmd(g, kind)}
}

// serviceInstallFlags are `exechost node|gateway install`'s flags.
type serviceInstallFlags struct {
	system, noStart, print bool
	hardening, runAs       string
	rwPaths                []string
	// node
	gateway, displayName string
	// gateway
	config, listen string
}

func newServiceInstallCmd(g *globals, kind string) *cobra.Command {
	var f serviceInstallFlags
	what := map[string]string{
		service.KindNode:    "the node runner (exechost node run)",
		service.KindGateway: "the gateway (exechost gateway)",
	}[kind]
	cmd := &cobra.Command{
		Use:   "install [-- EXTRA ARGS]",
		Short: "Install " + what + " as a system service (systemd on Linux, launchd on macOS)",
		Long: `Install ` + what + ` as a service: a systemd user unit
(or a system unit with --system) on Linux, a launchd agent (or daemon with
--system) on macOS; Windows is not supported yet. The unit is written, then
enabled and (re)started unless --no-start. Arguments after -- are appended
to the daemon's command line.

Agents' commands run by the service inherit its hardening. --hardening
strict (the gateway's default) makes the system and home read-only except
the state directory and --rw-path, and forbids W^X memory (JIT runtimes such
as node or java fail); --hardening light (the node's default) only forbids
privilege gain (setuid programs such as sudo do not elevate).` + map[string]string{
			service.KindNode: `

Never put a join key on a service's command line (units are world-readable):
pair once with 'echo K | exechost node run --join-key-file -' (or approve the pending node
on the gateway), then install.`,
			service.KindGateway: "",
		}[kind],
		RunE: func(cmd *cobra.Command, extra []string) error {
			if cmd.ArgsLenAtDash() < 0 && len(extra) > 0 {
				return usageHint("pass daemon arguments after --", "unexpected argument %q", extra[0])
			}
			c, err := serviceConfig(g, kind, &f, extra)
			if err != nil {
				return err
			}
			if f.print {
				unit, err := service.Render(c)
				if err != nil {
					return err
				}
				_, err = g.stdout.Write(unit)
				return err
			}
			if _, err := service.UnitPath(kind, c.System); err != nil {
				return err // unsupported platform: change nothing
			}
			if err := prepareServiceStateDir(c); err != nil {
				return err
			}
			path, err := service.Install(cmdContext(cmd), c, service.InstallOptions{NoStart: f.noStart, Out: g.stderr})
			if path != "" {
				fmt.Fprintf(g.stdout, "installed %s\n", path)
			}
			if err != nil {
				return err
			}
			if !f.noStart {
				fmt.Fprintf(g.stdout, "started %s (check: exechost %s status)\n", service.Name(kind), kind)
			}
			if kind == service.KindNode {
				if _, err := os.Stat(filepath.Join(c.StateDir, state.NodeFile)); errors.Is(err, os.ErrNotExist) {
					fmt.Fprintf(g.stderr, "note: this node is not paired yet; it waits as pending until you run `exechost nodes approve ID` on the gateway host\n")
				}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.system, "system", false, "install a system unit / launchd daemon instead of a per-user one (needs root)")
	fl.BoolVar(&f.noStart, "no-start", false, "only write the unit; do not enable or start it")
	fl.BoolVar(&f.print, "print", false, "print the unit to stdout and install nothing")
	fl.StringVar(&f.hardening, "hardening", "", "hardening profile: strict or light (default "+service.DefaultHardening(kind)+")")
	fl.StringSliceVar(&f.rwPaths, "rw-path", nil, "extra path the service may write to under strict hardening (repeatable)")
	fl.StringVar(&f.runAs, "user", "", "with --system: run the service as this user (default: the user who ran sudo, else root)")
	switch kind {
	case service.KindNode:
		fl.StringVar(&f.gateway, "gateway", DefaultGateway, "gateway URL the node connects to")
		fl.StringVar(&f.displayName, "display-name", "", "node display name")
	case service.KindGateway:
		fl.StringVar(&f.config, "config", "", "gateway config file (default <state>/"+state.ConfigFile+")")
		fl.StringVar(&f.listen, "listen", "", "gateway listen address")
	}
	return cmd
}

// serviceConfig turns flags into a service.Config.
func serviceConfig(g *globals, kind string, f *serviceInstallFlags, extra []string) (service.Config, error) {
	c := service.Config{Kind: kind, System: f.system, Hardening: f.hardening}
	switch f.hardening {
	case "", service.HardeningStrict, service.HardeningLight:
	default:
		return c, usagef("--hardening %q: want strict or light", f.hardening)
	}
	if f.runAs != "" && !f.system {
		return c, usagef("--user needs --system (a user unit always runs as you)")
	}
	if f.system {
		c.User = f.runAs
		if c.User == "" {
			c.User = os.Getenv("SUDO_USER")
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return c, fmt.Errorf("locate the exechost binary: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return c, fmt.Errorf("locate the exechost binary: %w", err)
	}
	c.Binary = exe
	if strings.HasPrefix(exe, os.TempDir()) {
		fmt.Fprintf(g.stderr, "warning: %s is in a temporary directory; the service will break when it goes (hint: install exechost to a permanent path first)\n", exe)
	}
	c.StateDir, err = serviceStateDir(g, c.User)
	if err != nil {
		return c, err
	}
	for _, p := range f.rwPaths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return c, fmt.Errorf("--rw-path %s: %w", p, err)
		}
		c.ReadWritePaths = append(c.ReadWritePaths, abs)
	}
	switch kind {
	case service.KindNode:
		c.Args = []string{"node", "run", "--gateway", f.gateway, "--state-dir", c.StateDir}
		if f.displayName != "" {
			c.Args = append(c.Args, "--display-name", f.displayName)
		}
	case service.KindGateway:
		c.Args = []string{"gateway", "--state-dir", c.StateDir}
		if f.config != "" {
			cfg, err := filepath.Abs(f.config)
			if err != nil {
				return c, fmt.Errorf("--config %s: %w", f.config, err)
			}
			c.Args = append(c.Args, "--config", cfg)
		}
		if f.listen != "" {
			c.Args = append(c.Args, "--listen", f.listen)
		}
	}
	c.Args = append(c.Args, extra...)
	return c, nil
}

// serviceStateDir is the state directory the service uses: --state-dir or
// $OPENCLAW_STATE_DIR when given, else ~/.openclaw of the user the service
// runs as (not root's, when root installs a unit for someone else).
func serviceStateDir(g *globals, runAs string) (string, error) {
	if runAs == "" || g.stateDir != "" || os.Getenv(state.EnvDir) != "" {
		return g.dir()
	}
	u, err := user.Lookup(runAs)
	if err != nil {
		return "", hint.Wrap(fmt.Errorf("service user %s: %w", runAs, err), "create the user or pass --user")
	}
	return filepath.Join(u.HomeDir, ".openclaw"), nil
}

// prepareServiceStateDir creates the state directory before the service
// starts: strict hardening makes everything around it read-only, so the
// daemon could not create it itself. For a system unit with User= it is
// handed to that user.
func prepareServiceStateDir(c service.Config) error {
	if c.User == "" {
		return state.Ensure(c.StateDir)
	}
	u, err := user.Lookup(c.User)
	if err != nil {
		return fmt.Errorf("service user %s: %w", c.User, err)
	}
	if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
		return fmt.Errorf("create state directory %s: %w", c.StateDir, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil // not a numeric-id platform; the service creates what it needs
	}
	if err := os.Lchown(c.StateDir, uid, gid); err != nil {
		return fmt.Errorf("hand state directory %s to %s: %w", c.StateDir, c.User, err)
	}
	return os.Chmod(c.StateDir, 0o700)
}

func newServiceUninstallCmd(g *globals, kind string) *cobra.Command {
	var system bool
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Stop and remove the " + service.Name(kind) + " service",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := service.Uninstall(cmdContext(cmd), kind, system, g.stderr)
			if errors.Is(err, service.ErrNotInstalled) {
				return hint.Wrap(err, fmt.Sprintf("was it installed with%s --system?", map[bool]string{true: "out", false: ""}[system]))
			}
			if path != "" {
				if _, serr := os.Stat(path); errors.Is(serr, os.ErrNotExist) {
					fmt.Fprintf(g.stdout, "removed %s\n", path)
				}
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&system, "system", false, "remove the system unit instead of the per-user one")
	return cmd
}

func newServiceStatusCmd(g *globals, kind string) *cobra.Command {
	var system bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the service manager's status of the " + service.Name(kind) + " service",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return service.Status(cmdContext(cmd), kind, system, g.stdout)
		},
	}
	cmd.Flags().BoolVar(&system, "system", false, "the system unit instead of the per-user one")
	return cmd
}
