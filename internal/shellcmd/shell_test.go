package shellcmd

import (
	"strings"
	"testing"
)

func TestShellPayloads(t *testing.T) {
	runOK(t, []okCase{
		{"sh -c 'ls; rm x'", []string{"BIN/ls via=sh", "BIN/rm via=sh"}},
		{"bash -c 'ls && rm x'", []string{"BIN/ls via=bash", "BIN/rm via=bash"}},
		{"zsh -c ls", []string{"BIN/zsh shell", "BIN/ls via=zsh"}},
		{"dash -ec 'ls | grep x'", []string{"BIN/ls via=dash", "BIN/grep via=dash"}},
		{"ksh -c 'ls'", []string{"BIN/ksh shell", "BIN/ls via=ksh"}},
		{"bash -e -u -o pipefail -c 'ls'", []string{"BIN/ls via=bash"}},
		{"bash --norc --noprofile -c 'ls'", []string{"BIN/ls via=bash"}},
		{"sh -c 'sh -c \"bash -c rm\"'", []string{"BIN/rm via=sh,sh,bash"}},
		{"sh -c 'echo $1'", nil},
		{"sh -c 'cd sub && ./build'", []string{"WORK/sub/build via=sh"}},
		{"nice sh -c 'ls'", []string{"BIN/ls via=nice,sh"}},
		{"BIN/sh -c ls", []string{"BIN/sh shell", "BIN/ls via=BIN/sh"}},
		{"HOME/bin/sneaky -c rm", []string{"HOME/bin/sneaky shell", "BIN/rm via=HOME/bin/sneaky"}},
		// Reading a script or standard input: the shell is the segment.
		{"bash x.sh", []string{"BIN/bash shell"}},
		{"sh -e script.sh arg", []string{"BIN/sh shell"}},
		{"bash", []string{"BIN/bash shell"}},
		{"bash -s", []string{"BIN/bash shell"}},
		{"sh -s -c ls", []string{"BIN/sh shell"}},
		{"fish -c 'rm x'", []string{"BIN/fish shell"}},
		// A shell that is not the host's (./bash) is not looked through.
		{"./bash -c 'rm x'", []string{"WORK/bash shell"}},
	})
	runFail(t, []failCase{
		{"sh -c '$0 \"$@\"' rm x", "refers to $0"},
		{"sh -c 'rm \"$@\"' sh x", "refers to $@"},
		{"sh -c 'echo $1 && $1' sh rm", "refers to $1"},
		{"bash -l -c ls", "bash -l runs login or rc files"},
		{"bash -lc ls", "bash -l"},
		{"bash -i -c ls", "bash -i"},
		{"bash -ic ls", "bash -i"},
		{"bash --login -c ls", "bash --login is not supported"},
		{"bash --rcfile x -c ls", "bash --rcfile"},
		{"bash --init-file x -c ls", "bash --init-file"},
		{"bash -O extglob -c ls", "option -O"},
		{"bash -o vi -c ls", "not known to be harmless"},
		{"bash -p -c ls", "option -p"},
		{"sh -k -c ls", "option -k"},
		{"sh -c", "-c without a command"},
		{"sh -c \"$X\"", "run-time value"},
		{"sh -c 'echo $1' x y", "refers to $1"},
		{"sh -c 'ls $(id)'", "in sh -c payload: command substitution $(…) at 1:4"},
		{"sh -c 'eval x'", "in sh -c payload: eval"},
		{"bash -c '[[ -f x ]]'", "[["},
		{"sh -c 'LD_PRELOAD=x ls'", "LD_PRELOAD"},
		{"sh -c 'ls > out'", "writes a file"},
		{"sh -c \"sh -c 'bash -c \\\"\\$(id)\\\"'\"", "command substitution"},
		{"$SHELL -c ls", "command position"},
		{"sh $X", "run-time value"},
	})
}

func TestNestingIsBounded(t *testing.T) {
	f := newFixture(t)
	cmd := strings.Repeat("nice ", maxDepth+1) + "ls"
	if a := Analyze(cmd, f.env); a.OK || !strings.Contains(a.Error, "too many nested") {
		t.Errorf("Analyze(%d nested wrappers) = %+v; want a depth failure", maxDepth+1, a)
	}
	cmd = strings.Repeat("nice ", maxDepth-1) + "ls"
	if a := Analyze(cmd, f.env); !a.OK {
		t.Errorf("Analyze(%d nested wrappers) failed: %s", maxDepth-1, a.Error)
	}
}

func TestHostileSizesFailFast(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct{ text, errHas string }{
		{strings.Repeat("(", 1<<20) + "ls" + strings.Repeat(")", 1<<20), "longer than"},
		{strings.Repeat("(", maxNesting+1) + "ls" + strings.Repeat(")", maxNesting+1), "nests parentheses or braces"},
		{strings.Repeat("{ ", maxNesting+1) + "ls" + strings.Repeat("; }", maxNesting+1), "nests parentheses or braces"},
		{"echo " + strings.Repeat("x", maxTextLen), "longer than"},
	} {
		if a := Analyze(tc.text, f.env); a.OK || !strings.Contains(a.Error, tc.errHas) {
			t.Errorf("Analyze(%d bytes) = OK=%v %q; want failure containing %q", len(tc.text), a.OK, a.Error, tc.errHas)
		}
	}
	deep := strings.Repeat("( ", maxNesting-1) + "ls" + strings.Repeat(" )", maxNesting-1)
	if a := Analyze(deep, f.env); !a.OK || len(a.Segments) != 1 {
		t.Errorf("Analyze(%d nested subshells) = %+v; want one segment", maxNesting-1, a)
	}
}

func TestInterpreters(t *testing.T) {
	runOK(t, []okCase{
		{"python3 -c 'import os; os.system(\"rm x\")'", []string{"BIN/python3 interpreter"}},
		{"python3.12 x.py", []string{"BIN/python3.12 interpreter"}},
		{"node -e 'x'", []string{"BIN/node interpreter"}},
		{"perl -e 'system(q(rm x))'", []string{"BIN/perl interpreter"}},
		{"ruby -e x", []string{"BIN/ruby interpreter"}},
		{"awk 'BEGIN{system(\"rm x\")}'", []string{"BIN/awk interpreter"}},
		{"gawk 1 notes", []string{"BIN/gawk interpreter"}},
		{"java -jar x.jar", []string{"BIN/java interpreter"}},
		{"deno run x.ts", []string{"BIN/deno interpreter"}},
		{"osascript -e x", []string{"BIN/osascript interpreter"}},
		{"ls | awk '{print}' | sort", []string{"BIN/ls", "BIN/awk interpreter", "BIN/sort"}},
		{"env python3 x.py", []string{"BIN/python3 interpreter via=env"}},
		// find, git and sed are ordinary commands: the path allowlist allows
		// all of their arguments (-exec, -c, e), which the docs say.
		{"find . -exec rm {} \\;", []string{"BIN/find"}},
		{"git -c core.pager='rm x' log", []string{"BIN/git"}},
	})
}
