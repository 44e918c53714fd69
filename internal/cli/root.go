// Package cli implements the exechost command line. Each subcommand lives in
// its own file; this file holds the root command, the flags every command
// shares and the exit-code contract (exitcode.go, docs/cli.md).
package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/exechost/exechost/internal/state"
	"github.com/exechost/exechost/internal/textsafe"
)

// Version is set at build time with -ldflags "-X …/cli.Version=…".
var Version = "dev"

// DefaultGateway is the gateway URL client commands use without --gateway
// (and without $EXECHOST_GATEWAY).
const DefaultGateway = "ws://127.0.0.1:18789"

// defaultAgent is the agent every command that acts or decides for an
// agent (exec, mcp, run, approvals check) uses without --agent: the
// gateway's default, so a local check predicts what an agent's exec does.
const defaultAgent = "main"

// EnvGateway, when set, replaces DefaultGateway as the default of every
// --gateway flag, and `exechost up` listens there: a shell (or an MCP
// client config) can point every command at one gateway at once.
const EnvGateway = "EXECHOST_GATEWAY"

// applyGatewayEnv makes $EXECHOST_GATEWAY the default of every --gateway
// flag that defaults to DefaultGateway, in one place for all commands.
func applyGatewayEnv(c *cobra.Command) {
	env := os.Getenv(EnvGateway)
	if env == "" {
		return
	}
	for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
		if f := fs.Lookup("gateway"); f != nil && f.DefValue == DefaultGateway {
			_ = f.Value.Set(env)
			f.DefValue = env
		}
	}
	for _, sub := range c.Commands() {
		applyGatewayEnv(sub)
	}
}

// globals are the flags every command takes.
type globals struct {
	stateDir string
	stdout   io.Writer
	stderr   io.Writer
	// args are the command line as given, for errors found before flags
	// are parsed (jsonOnStdout).
	args []string
	// onWebURL, when set, is told the approver web UI's full URL (with
	// its secret) once it serves; `exechost up` prints it.
	onWebURL func(url string)
	// credential is --credential: the client credential file to connect
	// with (client.go).
	credential string
}

// dir returns the resolved state directory (not created).
func (g *globals) dir() (string, error) { return state.Dir(g.stateDir) }

// printJSON writes v as indented JSON to stdout.
func (g *globals) printJSON(v any) error {
	enc := json.NewEncoder(g.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// NewRoot builds the command tree. Each constructor lives in its own file.
func NewRoot(stdout, stderr io.Writer) *cobra.Command { return newRoot(stdout, stderr, nil) }

func newRoot(stdout, stderr io.Writer, args []string) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr, args: args}
	root := &cobra.Command{
		Use:           "exechost",
		Short:         "Run AI agents' shell commands safely on sandboxes, the gateway host and paired nodes",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&g.stateDir, "state-dir", "", "state directory (default $"+state.EnvDir+" or ~/.openclaw)")
	root.PersistentFlags().StringVar(&g.credential, "credential", "", "client credential file to connect to the gateway with (default $"+EnvCredential+", else the state directory's gateway token)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		err = usageError{fmt.Errorf("%s: %w (hint: `%s --help`)", c.CommandPath(), err, c.CommandPath())}
		if jsonOnStdout(c, g.args) {
			// Flags did not parse, so --json was never read: keep the
			// promise of one JSON object on stdout anyway.
			return g.failJSON(err)
		}
		return err
	})
	for _, mk := range commands {
		root.AddCommand(mk(g))
	}
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the exechost version",
		Args:  cobra.NoArgs,
		Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(stdout, "exechost", Version) },
	})
	typeUsageErrors(root)
	applyGatewayEnv(root)
	return root
}

// jsonOnStdout reports whether c is `run` or `exec` and args ask for
// --json (before any "--"), which promises one JSON object on stdout.
func jsonOnStdout(c *cobra.Command, args []string) bool {
	if c.Name() != "exec" && c.Name() != "run" {
		return false
	}
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--json" || a == "--json=true" {
			return true
		}
	}
	return false
}

// commands lists every subcommand constructor; each file appends its own in
// an init function so files can be added without touching this one.
var commands []func(*globals) *cobra.Command

func register(mk func(*globals) *cobra.Command) { commands = append(commands, mk) }

// Main runs the CLI and returns the process exit status (see ExitCode).
func Main(args []string) int {
	return run(args, os.Stdout, os.Stderr)
}

// run is Main with its streams, for tests.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr, args)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return ExitOK
	}
	var ee exitError
	if !errors.As(err, &ee) {
		// Errors can echo host-supplied text: shown through the one sanitiser.
		msg := textsafe.Line(strings.ReplaceAll(err.Error(), "\n", " "))
		fmt.Fprintln(stderr, "exechost:", msg)
	}
	return ExitCode(err)
}
