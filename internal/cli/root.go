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
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/state"
	"github.com/exechost/exechost/internal/textsafe"
)

// Version is set at build time with -ldflags "-X …/cli.Version=…";
// without it, from the binary's build info (version.go).
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
	// connectTimeout bounds dialling the gateway and its handshake
	// (clientTimeout when 0; tests set it short).
	connectTimeout time.Duration
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

func newRoot(stdout, stderr io.Writer, args []string, tune ...func(*globals)) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr, args: args}
	for _, f := range tune {
		f(g)
	}
	root := &cobra.Command{
		Use:           "exechost",
		Short:         "Run AI agents' shell commands safely on sandboxes, the gateway host and paired nodes",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version, // --version
	}
	root.SetVersionTemplate("exechost {{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&g.stateDir, "state-dir", "", "state directory (default $"+state.EnvDir+" or ~/.openclaw)")
	root.PersistentFlags().StringVar(&g.credential, "credential", "", "client credential file to connect to the gateway with (default $"+EnvCredential+", else the state directory's gateway token)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		// With --json, run prints the error as the one JSON object.
		return usageError{hint.Wrap(fmt.Errorf("%s: %w", c.CommandPath(), err), fmt.Sprintf("`%s --help`", c.CommandPath()))}
	})
	// Only the command called is built: the others' flag sets would be
	// most of a short command's start (exec, run, version). Completion
	// scripts, help and cobra's suggestions need the whole tree.
	called := calledName(args)
	switch c, ok := commandNamed(called); {
	case called == "version": // added below
	case ok && called != "completion":
		root.AddCommand(c.mk(g))
	default:
		for _, c := range commands {
			root.AddCommand(c.mk(g))
		}
	}
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the exechost version",
		Args:  cobra.NoArgs,
		Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(stdout, "exechost", Version) },
	})
	typeUsageErrors(root)
	applyGatewayEnv(root)
	addValueCompletions(g, root)
	return root
}

// jsonOnStdout reports whether c has a --json flag and it was asked for:
// set, or (when flags did not parse, so it was never read) present in args
// before any "--". It promises one JSON object on stdout.
func jsonOnStdout(c *cobra.Command, args []string) bool {
	f := c.Flags().Lookup("json")
	if f == nil {
		return false
	}
	if f.Changed {
		return f.Value.String() == "true"
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

// countingWriter counts what a command wrote, so run knows whether a
// --json command printed its object before failing.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// command is a registered subcommand: its name (the first word of its
// Use) and its constructor.
type command struct {
	name string
	mk   func(*globals) *cobra.Command
}

// commands lists every subcommand; each file appends its own in an init
// function so files can be added without touching this one.
var commands []command

// register adds a subcommand; name must be the name mk's command has
// (TestRegisteredNames checks).
func register(name string, mk func(*globals) *cobra.Command) {
	if _, dup := commandNamed(name); dup {
		panic("cli: command " + name + " registered twice")
	}
	commands = append(commands, command{name, mk})
}

// commandNamed returns the registered command called name.
func commandNamed(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name && name != "" {
			return c, true
		}
	}
	return command{}, false
}

// calledName returns the subcommand args call, skipping the root's own
// flags, or "" when args start with anything else (help, a flag of
// cobra's, no command at all): those get the whole tree.
func calledName(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--state-dir" || a == "--credential":
			i++ // the flag's value
		case strings.HasPrefix(a, "--state-dir=") || strings.HasPrefix(a, "--credential="):
		case strings.HasPrefix(a, "-"):
			return ""
		default:
			return a
		}
	}
	return ""
}

// Main runs the CLI and returns the process exit status (see ExitCode).
func Main(args []string) int {
	return run(args, os.Stdout, os.Stderr)
}

// run is Main with its streams, for tests; tune adjusts the globals
// (tests shorten deadlines).
func run(args []string, stdout, stderr io.Writer, tune ...func(*globals)) int {
	out := &countingWriter{w: stdout}
	root := newRoot(out, stderr, args, tune...)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return ExitOK
	}
	if cmd != nil && out.n == 0 && jsonOnStdout(cmd, args) {
		// Every command with --json prints exactly one JSON object,
		// errors included (usage errors, unreachable gateways, …):
		// one that failed before printing gets the error object.
		code := ExitCode(err)
		if code == ExitFailure {
			code = wireExitCode(err)
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if enc.Encode(errorObject(err, code)) == nil {
			err = withCode(code, err)
		}
	}
	var ee exitError
	if !errors.As(err, &ee) {
		// Errors can echo host-supplied text: shown through the one sanitiser.
		msg := textsafe.Line(strings.ReplaceAll(err.Error(), "\n", " "))
		fmt.Fprintln(stderr, prefixed(msg))
	}
	return ExitCode(err)
}

// prefixed returns msg with exactly one leading "exechost: ": messages
// from other layers (a node's fallback note, the interpreter's refusal)
// may carry their own, which must not double.
func prefixed(msg string) string {
	for {
		rest, ok := strings.CutPrefix(msg, "exechost: ")
		if !ok {
			return "exechost: " + msg
		}
		msg = rest
	}
}
