// Package cli implements the exechost command line. Each subcommand lives in
// its own file; this file holds the root command, the flags every command
// shares and the exit-code conventions (0 ok, 1 failure, 2 usage).
package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/state"
	"github.com/exechost/exechost/internal/textsafe"
)

// Version is set at build time with -ldflags "-X …/cli.Version=…".
var Version = "dev"

// DefaultGateway is the gateway URL client commands use without --gateway.
const DefaultGateway = "ws://127.0.0.1:18789"

// usageError marks errors that exit with status 2.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// usagef returns an error that makes the command exit with status 2.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// exitError carries a specific exit status (for `exechost run`, which exits
// with the command's own code) without printing anything more.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// globals are the flags every command takes.
type globals struct {
	stateDir string
	stdout   io.Writer
	stderr   io.Writer
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
func NewRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "exechost",
		Short:         "Run AI agents' shell commands safely on sandboxes, the gateway host and paired nodes",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&g.stateDir, "state-dir", "", "state directory (default $"+state.EnvDir+" or ~/.openclaw)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	for _, mk := range commands {
		root.AddCommand(mk(g))
	}
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the exechost version",
		Args:  cobra.NoArgs,
		Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(stdout, "exechost", Version) },
	})
	return root
}

// commands lists every subcommand constructor; each file appends its own in
// an init function so files can be added without touching this one.
var commands []func(*globals) *cobra.Command

func register(mk func(*globals) *cobra.Command) { commands = append(commands, mk) }

// Main runs the CLI and returns the process exit status.
func Main(args []string) int {
	root := NewRoot(os.Stdout, os.Stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// Errors can echo host-supplied text: shown through the one sanitiser.
	msg := textsafe.Line(strings.ReplaceAll(err.Error(), "\n", " "))
	fmt.Fprintln(os.Stderr, "exechost:", msg)
	var ue usageError
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command") || strings.Contains(err.Error(), "accepts ") || strings.Contains(err.Error(), "requires at least") {
		return 2
	}
	return 1
}
