package shellcmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixture is a small fake host: a PATH directory of do-nothing executables,
// a home, a working directory and a few traps (a ./sed, a symlinked rg), so
// resolution is fully controlled by the test.
type fixture struct {
	root, bin, home, work string
	env                   Env
}

// fixtureTools are the executables on the fixture's PATH.
var fixtureTools = []string{
	"ls", "echo", "git", "grep", "sort", "uniq", "rm", "cat", "find", "sed", "printf", "test", "[",
	"true", "false", "pwd", "kill", "id", "date", "make", "curl", "mytool",
	"env", "nice", "nohup", "timeout", "stdbuf", "time", "xargs", "ionice", "setsid", "chrt", "taskset",
	"sudo", "doas", "run0", "pkexec",
	"sh", "bash", "zsh", "dash", "ksh", "fish",
	"python3", "python3.12", "node", "perl", "ruby", "awk", "gawk", "java", "deno", "osascript",
	"busybox", "toybox", "flock", "watch", "strace",
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{root: root, bin: filepath.Join(root, "bin"), home: filepath.Join(root, "home"), work: filepath.Join(root, "work")}
	for _, d := range []string{f.bin, f.home, f.work, filepath.Join(f.home, "bin"), filepath.Join(f.work, "sub"), filepath.Join(f.work, "rel"),
		filepath.Join(root, "opt/homebrew/Cellar/rg/bin"), filepath.Join(root, "opt/homebrew/bin"), filepath.Join(root, "elsewhere/deep")} {
		mkdir(t, d)
	}
	for _, n := range fixtureTools {
		writeExe(t, filepath.Join(f.bin, n))
	}
	writeExe(t, filepath.Join(f.work, "sed"))          // ./sed is not /bin/sed
	writeExe(t, filepath.Join(f.work, "sub", "build")) // reached via cd sub
	writeExe(t, filepath.Join(f.home, "bin", "tool"))  // ~/bin/tool
	writeExe(t, filepath.Join(root, "opt/homebrew/Cellar/rg/bin/rg"))
	symlink(t, "../Cellar/rg/bin/rg", filepath.Join(root, "opt/homebrew/bin/rg"))
	// ~/bin/e is env under another name; ~/bin/sneaky is bash.
	symlink(t, filepath.Join(f.bin, "env"), filepath.Join(f.home, "bin", "e"))
	symlink(t, filepath.Join(f.bin, "bash"), filepath.Join(f.home, "bin", "sneaky"))
	// A file that is not executable, and a directory named like a tool.
	if err := os.WriteFile(filepath.Join(f.work, "notes"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	mkdir(t, filepath.Join(f.work, "adir"))
	// work/link -> elsewhere/deep, so work/link/../x is elsewhere/x to the
	// kernel but work/x to a lexical clean.
	symlink(t, filepath.Join(root, "elsewhere/deep"), filepath.Join(f.work, "link"))
	writeExe(t, filepath.Join(root, "elsewhere", "x"))
	writeExe(t, filepath.Join(f.work, "x"))
	// A copy of bash outside the system and PATH directories.
	writeExe(t, filepath.Join(f.work, "bash"))
	writeExe(t, filepath.Join(f.work, "env"))
	f.env = Env{Cwd: f.work, PATH: f.bin, Home: f.home}
	return f
}

// expand replaces BIN, HOME, WORK and ROOT placeholders in want values.
func (f *fixture) expand(s string) string {
	r := strings.NewReplacer("BIN/", f.bin+"/", "HOME/", f.home+"/", "WORK/", f.work+"/", "ROOT/", f.root+"/")
	return r.Replace(s)
}

func mkdir(t testing.TB, d string) {
	t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeExe(t testing.TB, p string) {
	t.Helper()
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
