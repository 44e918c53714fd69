package cli

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"
)

// TestRegisteredNames checks that every registered name is the name of
// the command its constructor builds: newRoot builds only the command a
// command line calls, found by that name.
func TestRegisteredNames(t *testing.T) {
	if len(commands) == 0 {
		t.Fatal("no commands registered")
	}
	for _, c := range commands {
		if got := c.mk(&globals{stdout: io.Discard, stderr: io.Discard}).Name(); got != c.name {
			t.Errorf("registered as %q, builds %q", c.name, got)
		}
	}
}

// TestCalledName checks which subcommand a command line calls, past the
// root's own flags; anything else gets the whole tree.
func TestCalledName(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"exec", "--host", "node", "true"}, "exec"},
		{[]string{"--state-dir", "/s", "run", "ls"}, "run"},
		{[]string{"--state-dir=/s", "--credential", "c", "nodes", "list"}, "nodes"},
		{[]string{"--credential=c", "version"}, "version"},
		{[]string{"--help"}, ""},
		{[]string{"-h", "exec"}, ""},
		{[]string{"--state-dir"}, ""},
		{nil, ""},
	} {
		if got := calledName(tc.args); got != tc.want {
			t.Errorf("calledName(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

// TestTreeForHelpAndOneCommand checks that help and completion still see
// every command, and that a called command is built alone and runs.
func TestTreeForHelpAndOneCommand(t *testing.T) {
	names := func(args []string) []string {
		var out []string
		for _, c := range newRoot(io.Discard, io.Discard, args).Commands() {
			out = append(out, c.Name())
		}
		return out
	}
	for _, args := range [][]string{{"help"}, {"--help"}, {"completion", "bash"}, {"__complete", "e"}, {"exce"}, nil} {
		if got := names(args); len(got) < len(commands)+1 {
			t.Errorf("%q: tree has %v, want every command", args, got)
		}
	}
	if got := names([]string{"--state-dir", t.TempDir(), "exec", "--help"}); !slices.Contains(got, "exec") || len(got) > 4 {
		t.Errorf("exec: tree has %v, want exec alone (with cobra's own)", got)
	}
	var out bytes.Buffer
	if code := run([]string{"version"}, &out, io.Discard); code != ExitOK || !strings.HasPrefix(out.String(), "exechost ") {
		t.Errorf("version = %d, %q", code, out.String())
	}
	out.Reset()
	if code := run([]string{"exce"}, io.Discard, &out); code == ExitOK || !strings.Contains(out.String(), "exec") {
		t.Errorf("a misspelt command = %d, %q; want an error suggesting exec", code, out.String())
	}
}

// BenchmarkNewRoot compares the tree a called command gets with the whole
// one (help): `go test -run XXX -bench NewRoot ./internal/cli`.
func BenchmarkNewRoot(b *testing.B) {
	for _, args := range [][]string{{"version"}, {"exec", "true"}, {"help"}} {
		b.Run(args[0], func(b *testing.B) {
			for b.Loop() {
				newRoot(io.Discard, io.Discard, args)
			}
		})
	}
}
