package shellcmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolution(t *testing.T) {
	runOK(t, []okCase{
		{"sed -n p notes", []string{"BIN/sed"}},
		{"./sed -n p notes", []string{"WORK/sed"}},
		{"WORK/sed", []string{"WORK/sed"}},
		{"sub/build", []string{"WORK/sub/build"}},
		{"./sub/../sed", []string{"WORK/sed"}},
		{"../work/sed", []string{"WORK/sed"}},
		{"BIN//ls", []string{"BIN/ls"}},
		{"~/bin/tool", []string{"HOME/bin/tool"}},
		{"'~/bin/tool'", []string{"-"}},
		{"nosuch", []string{"-"}},
		{"./notes", []string{"-"}},
		{"./adir", []string{"-"}},
		{"adir", []string{"-"}},
		{"/nonexistent/bin/ls", []string{"-"}},
	})
	runFail(t, []failCase{
		{"link/../x", "uses \"..\" through a symlink"},
	})
}

func TestSymlinksKeepResolvedAndRealPaths(t *testing.T) {
	f := newFixture(t)
	brew := filepath.Join(f.root, "opt/homebrew/bin")
	env := f.env
	env.PATH = brew + ":" + f.bin
	for _, cmd := range []string{"rg -n TODO", brew + "/rg -n TODO"} {
		a := Analyze(cmd, env)
		if !a.OK || len(a.Segments) != 1 {
			t.Fatalf("Analyze(%q) = %+v", cmd, a)
		}
		s := a.Segments[0]
		if want := filepath.Join(brew, "rg"); s.ResolvedPath != want {
			t.Errorf("Analyze(%q) ResolvedPath = %q; want the path as found, %q", cmd, s.ResolvedPath, want)
		}
		if want := filepath.Join(f.root, "opt/homebrew/Cellar/rg/bin/rg"); s.RealPath != want {
			t.Errorf("Analyze(%q) RealPath = %q; want the symlink target %q", cmd, s.RealPath, want)
		}
	}
}

func TestPATHEntries(t *testing.T) {
	f := newFixture(t)
	writeExe(t, filepath.Join(f.work, "rel", "ls"))
	tests := []struct {
		name, path, cwd, cmd string
		want                 []string // ResolvedPaths (placeholders) when OK
		errHas               string
	}{
		{"relative entry holding the name", "rel:" + f.bin, f.work, "ls", nil, "relative PATH entry \"rel\""},
		{"empty entry is the cwd", ":" + f.bin, f.work, "sed", nil, "relative PATH entry \"\""},
		{"dot entry", ".:" + f.bin, f.work, "sed", nil, "relative PATH entry \".\""},
		{"relative entry without the name", "rel:" + f.bin, f.work, "grep", []string{"BIN/grep"}, ""},
		{"relative entry after the match", f.bin + ":.", f.work, "sed", []string{"BIN/sed"}, ""},
		{"relative entry, unknown cwd", "rel:" + f.bin, "", "grep", nil, "working directory is not known"},
		{"unclean entry", f.bin + "/../bin", f.work, "ls", []string{"BIN/ls"}, ""},
		{"empty PATH searches only the cwd", "", f.work, "ls", []string{""}, ""},
		{"empty PATH finds the cwd's file", "", f.work, "sed", nil, "relative PATH entry"},
		{"no cwd, bare name", f.bin, "", "ls", []string{"BIN/ls"}, ""},
		{"no cwd, relative path", f.bin, "", "./sed", []string{""}, ""},
		{"relative cwd is ignored", f.bin, "work", "./sed", []string{""}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := Analyze(tc.cmd, Env{Cwd: tc.cwd, PATH: tc.path, Home: f.home})
			if tc.errHas != "" {
				if a.OK || !strings.Contains(a.Error, tc.errHas) {
					t.Fatalf("Analyze(%q, PATH=%q) = %+v; want failure containing %q", tc.cmd, tc.path, a, tc.errHas)
				}
				return
			}
			if !a.OK {
				t.Fatalf("Analyze(%q, PATH=%q) failed: %s", tc.cmd, tc.path, a.Error)
			}
			var want []string
			for _, w := range tc.want {
				want = append(want, f.expand(w))
			}
			if diff := cmp.Diff(want, a.Paths()); diff != "" {
				t.Errorf("Paths() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCd(t *testing.T) {
	runOK(t, []okCase{
		{"cd sub && ./build", []string{"WORK/sub/build"}},
		{"cd WORK/sub && ./build", []string{"WORK/sub/build"}},
		{"cd -P sub && ./build", []string{"WORK/sub/build"}},
		{"cd -- sub && ./build", []string{"WORK/sub/build"}},
		{"cd sub && cd .. && ./sed", []string{"WORK/sed"}},
		{"cd && ./bin/tool", []string{"HOME/bin/tool"}},
		{"cd ~/bin && ./tool", []string{"HOME/bin/tool"}},
		{"cd sub && ls; ls", []string{"BIN/ls", "BIN/ls"}},
		{"cd sub; ls", []string{"BIN/ls"}},
		{"(cd sub && ./build); ./sed", []string{"WORK/sub/build", "WORK/sed"}},
		{"cd sub & ./sed", []string{"WORK/sed"}},
		{"command cd sub && ./build", []string{"WORK/sub/build"}},
		{"cd . && ./sed", []string{"WORK/sed"}},
		{"cd sub && sh -c './build'", []string{"WORK/sub/build via=sh"}},
		{"sh -c 'cd sub' && ./sed", []string{"WORK/sed"}},
		{"cd /tmp && git status | grep -v x | sort | uniq -c", []string{"BIN/git", "BIN/grep", "BIN/sort", "BIN/uniq"}},
	})
	runFail(t, []failCase{
		{"cd sub; ./build", "relative command path ./build after a cd whose effect is uncertain"},
		{"cd sub && ./build; ./sed", "after a cd whose effect is uncertain"},
		{"cd sub || ./sed", "uncertain"},
		{"if true; then cd sub; fi; ./build", "uncertain"},
		{"ls | cd sub; ./build", "uncertain"},
		{"for d in a; do cd sub; done", "cd inside a loop"},
		{"while true; do cd sub; ./build; done", "uncertain"},
		{"while true; do cd sub; done", "cd inside a loop"},
		{"cd nosuch && ls", "is not a directory"},
		{"cd notes && ls", "is not a directory"},
		{"cd $D && ls", "cd with a run-time argument"},
		{"cd \"$D\"", "cd with a run-time argument"},
		{"cd - && ls", "depends on shell state"},
		{"cd a b", "more than one argument"},
		{"pushd sub", "pushd"},
		{"cd link/.. && ./x", "through a symlink"},
		{"cd link && ./../x", "through a symlink"},
		{"cd WORK/link/.. && ./x", "through a symlink"},
		{"popd", "popd"},
	})
}

func TestBuiltins(t *testing.T) {
	runOK(t, []okCase{
		{"set -e; ls", []string{"BIN/ls"}},
		{"set -euo pipefail; ls", []string{"BIN/ls"}},
		{"set -x +e -- a b", nil},
		{": noop $x", nil},
		{"ls || exit 1", []string{"BIN/ls"}},
		{"true && false", nil},
		{"test -f x && [ -d y ]", nil},
		{"[ \"$x\" = y ]", nil},
		{"printf '%s\\n' a", nil},
		{"echo x; pwd; BIN/kill -0 1", []string{"BIN/kill"}},
		{"type ls", nil},
		{"wait", nil},
		{"shift; break; continue; return", nil},
		{"exec eval x", []string{"- via=exec"}},
	})
	runFail(t, []failCase{
		{"eval ls", "eval runs its arguments as shell text"},
		{"source ./x", "source runs a file"},
		{". ./x", ". runs a file"},
		{"alias ls=rm; ls", "alias"},
		{"trap 'rm x' EXIT", "trap"},
		{"unset PATH", "unset"},
		{"shopt -s expand_aliases", "shopt"},
		{"enable -n echo", "enable"},
		{"builtin echo x", "builtin"},
		{"hash -p /tmp/x ls", "hash"},
		{"ulimit -n 1", "ulimit"},
		{"umask 0", "umask"},
		{"read x", "read"},
		{"getopts a x", "getopts"},
		{"set -k; ls", "set -k"},
		{"set -o vi", "set -o"},
		{"set -o $X", "set with a run-time argument"},
		{"kill -0 1", "kill is a shell builtin the interpreter does not vouch for"},
		{"jobs -x ls", "jobs is a shell builtin"},
		{"set $X", "run-time argument"},
		{"printf -v x y", "printf"},
		{"printf \"$f\" y", "printf"},
		{"test -v 'a[$(id)]'", "test -v"},
		{"[ -v x ]", "[ -v"},
		{"[ \"$x\" 'a[$(id)]' ]", "run-time operands"},
		{"wait -p x", "wait"},
		{"export 'a[1]=x'", "not a plain variable name"},
		{"export $X", "run-time value"},
		{"command eval x", "eval"},
		{"command eval x", "eval runs its arguments"},
	})
}

func TestAnalyzeArgv(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		argv   []string
		want   []string
		errHas string
	}{
		{argv: []string{"ls", "-l"}, want: []string{"BIN/ls"}},
		{argv: []string{"./sed", "p"}, want: []string{"WORK/sed"}},
		{argv: []string{"~/bin/tool"}, want: []string{"-"}}, // execve does not expand ~
		{argv: []string{"ls", "$(id)", "; rm x"}, want: []string{"BIN/ls"}},
		{argv: []string{"$(id)"}, want: []string{"-"}},
		{argv: []string{"cd", "/"}, want: []string{}},
		{argv: []string{"eval", "rm x"}, errHas: "eval runs its arguments"},
		{argv: []string{"sh", "-c", "ls; rm x"}, want: []string{"BIN/ls via=sh", "BIN/rm via=sh"}},
		{argv: []string{"/bin/sh", "-c", "ls"}, want: []string{"BIN/ls via=/bin/sh"}},
		{argv: []string{"env", "FOO=1", "nice", "ls"}, want: []string{"BIN/ls via=env,nice"}},
		{argv: []string{"sudo", "mytool"}, want: []string{"BIN/sudo privilege", "BIN/mytool via=sudo"}},
		{argv: []string{"xargs", "rm"}, want: []string{"BIN/xargs wrapper", "BIN/rm via=xargs"}},
		{argv: []string{"bash", "x.sh"}, want: []string{"BIN/bash shell"}},
		{argv: []string{"python3", "-c", "x"}, want: []string{"BIN/python3 interpreter"}},
		{argv: []string{}, errHas: "empty argv"},
		{argv: []string{""}, errHas: "empty command name"},
		{argv: []string{"env", "LD_PRELOAD=x", "ls"}, errHas: "env sets LD_PRELOAD"},
		{argv: []string{"bash", "-lc", "ls"}, errHas: "bash -l"},
		{argv: []string{"sh", "-c", "$0", "rm"}, errHas: "refers to $0"},
		{argv: []string{"sh", "-c", "ls > out"}, errHas: "writes a file"},
		{argv: []string{"env", "-S", "rm x"}, errHas: "env -S"},
		{argv: []string{"busybox", "rm"}, errHas: "busybox"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.argv, " "), func(t *testing.T) {
			a := AnalyzeArgv(tc.argv, f.env)
			if tc.errHas != "" {
				if a.OK || !strings.Contains(a.Error, tc.errHas) {
					t.Fatalf("AnalyzeArgv(%q) = %+v; want failure containing %q", tc.argv, a, tc.errHas)
				}
				return
			}
			if !a.OK {
				t.Fatalf("AnalyzeArgv(%q) failed: %s", tc.argv, a.Error)
			}
			if diff := cmp.Diff(tc.want, segSummary(f, a)); diff != "" {
				t.Errorf("AnalyzeArgv(%q) (-want +got):\n%s", tc.argv, diff)
			}
		})
	}
}

func TestSegmentFields(t *testing.T) {
	f := newFixture(t)
	a := Analyze(`FOO=1 nice -n 2 'l'"s" -la "$HOME" *.go`, f.env)
	want := Analysis{OK: true, Segments: []Segment{{
		Argv:         []string{"ls", "-la", `"$HOME"`, "*.go"},
		Dynamic:      []bool{false, false, true, true},
		Name:         "ls",
		ResolvedPath: filepath.Join(f.bin, "ls"),
		RealPath:     filepath.Join(f.bin, "ls"),
		Role:         RoleCommand,
		Via:          []string{"nice"},
		Applied:      []string{"nice"},
		Runs:         "exec " + filepath.Join(f.bin, "ls") + " (nice applied by the runner)",
		File:         statFileID(t, filepath.Join(f.bin, "ls")),
	}}}
	want.Env = []string{"FOO"}
	want.Canonical = `FOO=1 nice -n 2 'l'"s" -la "$HOME" *.go` + "\n"
	want.Hash = Hash(want.Canonical)
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("Analyze (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{filepath.Join(f.bin, "ls")}, a.Paths()); diff != "" {
		t.Errorf("Paths (-want +got):\n%s", diff)
	}
	// A failed analysis still returns a non-nil segment list for JSON.
	if b := Analyze("$(x)", f.env); b.Segments == nil || b.OK {
		t.Errorf("Analyze($(x)) = %+v; want OK=false and an empty, non-nil segment list", b)
	}
	if _, err := os.Stat(f.work); err != nil {
		t.Fatal(err)
	}
}

// statFileID is the file at p, following symlinks, as a fresh stat names
// it (zero where the platform has no file ids).
func statFileID(t *testing.T, p string) FileID {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := fileIDOf(fi)
	return id
}

// TestSegmentFile: a segment names the file its path leads to, through
// symlinks as execve follows them, and no file when it did not resolve.
func TestSegmentFile(t *testing.T) {
	f := newFixture(t)
	env := f.env
	env.PATH = filepath.Join(f.root, "opt/homebrew/bin") + ":" + f.bin
	a := Analyze("rg x | sed p | nosuchtool", env)
	if !a.OK || len(a.Segments) != 3 {
		t.Fatalf("Analyze = %+v", a)
	}
	for i, want := range []FileID{
		statFileID(t, filepath.Join(f.root, "opt/homebrew/Cellar/rg/bin/rg")),
		statFileID(t, filepath.Join(f.bin, "sed")),
		{},
	} {
		if got := a.Segments[i].File; got != want {
			t.Errorf("segment %d (%s): File = %+v, want %+v", i, a.Segments[i].Name, got, want)
		}
	}
}
