package shellcmd

import (
	"path"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// hasSubstitution reports whether text parses (as Analyze parses it) to an
// AST containing a command or process substitution.
func hasSubstitution(text string) bool {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX), syntax.KeepComments(true)).Parse(strings.NewReader(text), "")
	if err != nil {
		return false
	}
	found := false
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n.(type) {
		case *syntax.CmdSubst, *syntax.ProcSubst:
			found = true
		}
		return !found
	})
	return found
}

func checkInvariants(t *testing.T, what string, a Analysis) {
	t.Helper()
	if a.OK && a.Error != "" {
		t.Fatalf("%s: OK with error %q", what, a.Error)
	}
	if !a.OK && a.Error == "" {
		t.Fatalf("%s: failed without saying why", what)
	}
	if a.Segments == nil {
		t.Fatalf("%s: nil segments", what)
	}
	for _, s := range a.Segments {
		if s.ResolvedPath != "" && (!strings.HasPrefix(s.ResolvedPath, "/") || path.Clean(s.ResolvedPath) != s.ResolvedPath) {
			t.Fatalf("%s: resolved path %q is not absolute and clean", what, s.ResolvedPath)
		}
		switch s.Role {
		case RoleCommand, RoleShell, RoleInterpreter, RolePrivilege, RoleWrapper:
		default:
			t.Fatalf("%s: segment with role %q", what, s.Role)
		}
	}
	paths, notes := Recordable(a)
	if !a.OK && len(paths) > 0 {
		t.Fatalf("%s: Recordable records %q from a failed analysis", what, paths)
	}
	if len(paths) == 0 && len(notes) == 0 {
		t.Fatalf("%s: Recordable records nothing without saying why", what)
	}
}

// FuzzAnalyze checks that analysis never panics, that its result is
// well-formed, and that text whose syntax tree holds a command or process
// substitution is never analysed as OK.
func FuzzAnalyze(f *testing.F) {
	fx := newFixture(f)
	for _, s := range append(append([]string{}, differentialCorpus...),
		"ls $(rm x)", "echo \"`id`\"", "cat <<E\n$(x)\nE", "sh -c 'ls $(id)'", "env -S 'x'", "sudo -u a ls",
		"xargs -I{} sh -c '{}'", "cd sub && ./build", "a=$(x) b", "${x:-$(y)}", "$((x))", "bash -lc ls",
		"ls > /dev/null 2>&1", "time -p nice -n 1 env A=1 timeout 5 ls", "f() { x; }", "((x))", "{a,b}",
	) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		a := Analyze(text, fx.env)
		checkInvariants(t, "Analyze", a)
		if a.OK && hasSubstitution(text) {
			t.Fatalf("Analyze(%q) = OK although the text holds a substitution: %+v", text, a)
		}
	})
}

// FuzzAnalyzeArgv checks the same invariants for argv analysis; the input
// is split on NUL bytes into words.
func FuzzAnalyzeArgv(f *testing.F) {
	fx := newFixture(f)
	for _, s := range []string{"ls\x00-l", "sh\x00-c\x00ls; rm x", "env\x00-i\x00ls", "sudo\x00ls", "xargs\x00sh\x00-c\x00x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, joined string) {
		argv := strings.Split(joined, "\x00")
		checkInvariants(t, "AnalyzeArgv", AnalyzeArgv(argv, fx.env))
	})
}
