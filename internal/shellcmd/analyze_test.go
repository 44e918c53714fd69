package shellcmd

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// okCase is a command whose analysis must succeed with exactly these
// segments, written as "PATH" or "PATH role" or "PATH via=a,b"
// (placeholders BIN/, HOME/, WORK/, ROOT/; "-" for a name that did not
// resolve).
type okCase struct {
	cmd  string
	segs []string
}

func segSummary(f *fixture, a Analysis) []string {
	out := []string{}
	r := strings.NewReplacer(f.bin+"/", "BIN/", f.home+"/", "HOME/", f.work+"/", "WORK/", f.root+"/", "ROOT/")
	for _, s := range a.Segments {
		p := s.ResolvedPath
		if p == "" {
			p = "-"
		}
		if s.Role != RoleCommand {
			p += " " + string(s.Role)
		}
		if len(s.Via) > 0 {
			p += " via=" + strings.Join(s.Via, ",")
		}
		out = append(out, r.Replace(p))
	}
	return out
}

func runOK(t *testing.T, cases []okCase) {
	t.Helper()
	f := newFixture(t)
	for _, tc := range cases {
		t.Run(tc.cmd, func(t *testing.T) {
			a := Analyze(f.expand(tc.cmd), f.env)
			if !a.OK {
				t.Fatalf("Analyze(%q) failed: %s", tc.cmd, a.Error)
			}
			want := tc.segs
			if want == nil {
				want = []string{}
			}
			if diff := cmp.Diff(want, segSummary(f, a)); diff != "" {
				t.Errorf("Analyze(%q) segments (-want +got):\n%s", tc.cmd, diff)
			}
		})
	}
}

// failCase is a command whose analysis must fail with an error containing
// the substring.
type failCase struct {
	cmd, errHas string
}

func runFail(t *testing.T, cases []failCase) {
	t.Helper()
	f := newFixture(t)
	for _, tc := range cases {
		t.Run(tc.cmd, func(t *testing.T) {
			a := Analyze(f.expand(tc.cmd), f.env)
			if a.OK {
				t.Fatalf("Analyze(%q) = OK with %v; want failure containing %q", tc.cmd, segSummary(f, a), tc.errHas)
			}
			if !strings.Contains(a.Error, tc.errHas) {
				t.Errorf("Analyze(%q).Error = %q; want it to contain %q", tc.cmd, a.Error, tc.errHas)
			}
		})
	}
}

func TestChaining(t *testing.T) {
	runOK(t, []okCase{
		{"ls; rm x", []string{"BIN/ls", "BIN/rm"}},
		{"ls;rm x", []string{"BIN/ls", "BIN/rm"}},
		{"ls && rm x", []string{"BIN/ls", "BIN/rm"}},
		{"ls || rm x", []string{"BIN/ls", "BIN/rm"}},
		{"ls | rm x", []string{"BIN/ls", "BIN/rm"}},
		{"ls & rm x", []string{"BIN/ls", "BIN/rm"}},
		{"ls\nrm x", []string{"BIN/ls", "BIN/rm"}},
		{"ls \\\n && rm x", []string{"BIN/ls", "BIN/rm"}},
		{"! ls", []string{"BIN/ls"}},
		{"(ls; id)", []string{"BIN/ls", "BIN/id"}},
		{"{ ls; id; }", []string{"BIN/ls", "BIN/id"}},
		{"if ls; then id; elif pwd; then date; else true; fi", []string{"BIN/ls", "BIN/id", "BIN/date"}},
		{"while false; do ls; done", []string{"BIN/ls"}},
		{"until true; do ls; done", []string{"BIN/ls"}},
		{"for i in a b; do echo $i; done", nil},
		{"case x in a) ls;; b|c) id;; *) rm y;; esac", []string{"BIN/ls", "BIN/id", "BIN/rm"}},
		{"ls | grep x | sort | uniq -c", []string{"BIN/ls", "BIN/grep", "BIN/sort", "BIN/uniq"}},
		{"", nil},
		{"   \n\n", nil},
	})
}

func TestQuotedOperatorsAreData(t *testing.T) {
	runOK(t, []okCase{
		{`echo "a && b"`, nil},
		{`echo 'a; rm -rf /'`, nil},
		{`echo '$(rm x)'`, nil},
		{"echo '`rm x`'", nil},
		{`echo "\$(rm x)"`, nil},
		{`echo \$\(rm x\)`, nil},
		{`grep ';' notes`, []string{"BIN/grep"}},
		{`grep '|' notes`, []string{"BIN/grep"}},
		{`echo a\;rm`, nil},
		{`echo "x # not a comment"; ls`, []string{"BIN/ls"}},
		{`echo a#b`, nil},
	})
}

func TestComments(t *testing.T) {
	runOK(t, []okCase{
		{"# just a comment", nil},
		{"# ls\nrm x", []string{"BIN/rm"}},
		{"ls # ; rm x", []string{"BIN/ls"}},
		{"# c1\n# c2\nls\n# c3\nrm x\n", []string{"BIN/ls", "BIN/rm"}},
	})
	runFail(t, []failCase{
		{"ls #\\\nrm x", "comment ending in a backslash"},
		{"# harmless \\\nrm -rf x", "comment ending in a backslash"},
	})
}

func TestSubstitutionsFail(t *testing.T) {
	runFail(t, []failCase{
		{"echo $(id)", "command substitution $(…) at 1:6"},
		{"echo `id`", "command substitution `…` at 1:6"},
		{`echo "$(id)"`, "command substitution"},
		{"echo \"`id`\"", "command substitution"},
		{"$(id)", "command substitution"},
		{"ls $(id)", "command substitution"},
		{"echo ${x:+$(id)}", "command substitution"},
		{"echo ${x:-`id`}", "command substitution"},
		{`echo "${x#$(id)}"`, "command substitution"},
		{"echo $(( $(id) ))", "arithmetic"},
		{"X=$(id) ls", "command substitution"},
		{"X=$(id)", "command substitution"},
		{"for i in $(ls); do echo $i; done", "command substitution"},
		{"case $(id) in x) ls;; esac", "command substitution"},
		{"case x in $(id)) ls;; esac", "command substitution"},
		{"cat <<EOF\n$(id)\nEOF", "command substitution $(…) at 2:1"},
		{"cat <<EOF\nhello `id`\nEOF", "command substitution"},
		{"cat <<-EOF\n\t${x:-$(id)}\n\tEOF", "command substitution"},
		{"ls > $(id)", "command substitution"},
		{"ls && echo $(id)", "command substitution"},
		{"# $(x)\nls $(id)", "command substitution"},
		{"cat <(ls)", "parse error"},
		{"diff <(ls) <(ls)", "parse error"},
		{"tee >(rm x)", "parse error"},
		{"echo $((x))", "arithmetic with a variable"},
		{"echo $((x+1))", "arithmetic with a variable"},
		{"echo $(($x))", "arithmetic with a variable"},
		{"echo $((i++))", "arithmetic"},
		{"echo $[x]", "$[…] arithmetic"},
		{`echo "$[1+1]"`, "$[…] arithmetic"},
		{"echo ${x=y}", "assignment expansion"},
		{"echo ${x:=y}", "assignment expansion"},
		{"echo ${!x}", "parse error"},
		{"echo ${x@P}", "parse error"},
		{"echo ${x[$(id)]}", "parse error"},
		{"echo ${ id; }", "parse error"},
	})
}

func TestExpansionsInCommandPositionFail(t *testing.T) {
	runFail(t, []failCase{
		{"$X", "parameter expansion in command position ($X) at 1:1"},
		{"${X}", "parameter expansion in command position"},
		{`"$X" arg`, "parameter expansion in command position"},
		{"X=ls; $X", "parameter expansion in command position"},
		{"/usr/bin/$X", "parameter expansion"},
		{"l*", "glob in command position"},
		{"/bin/l?", "glob in command position"},
		{"/bin/[l]s", "glob in command position"},
		{"{ls,-la}", "brace expansion in command position"},
		{"{rm,-rf,x}", "brace expansion in command position"},
		{"l{s,}", "brace expansion"},
		{"{x}{rm,x}", "brace expansion"},
		{"{a..c}", "brace expansion"},
		{"~user/bin/x", "~user expansion"},
		{`$'\x72m' x`, "command position"},
		{`$"ls"`, "command position"},
		{`""`, "empty command name"},
		{`PATH+=:/tmp`, "assignment in bash"},
		{`a[1]=2`, "glob"},
		{`a[$x]=2`, "command position"},
		{"((x))", "arithmetic in bash"},
		{"[[ -f x ]]", "[[ is bash-only syntax"},
		{"nice $CMD", "run-time value $CMD"},
		{"env $X ls", "run-time value $X"},
	})
	runOK(t, []okCase{
		{"( (ls) )", []string{"BIN/ls"}},
		{"echo *.go {a,b} ~/x $HOME ${x:-y} $((1+2))", nil},
		{`'ls' "-l"`, []string{"BIN/ls"}},
		{`l's' x`, []string{"BIN/ls"}},
		{`\ls`, []string{"BIN/ls"}},
		{`'l*'`, []string{"-"}},
		{`"{ls,-la}"`, []string{"-"}},
		{"~/bin/tool", []string{"HOME/bin/tool"}},
		{"ls x$", []string{"BIN/ls"}},
	})
}

func TestEnvironmentAssignments(t *testing.T) {
	var fails []failCase
	for _, v := range []string{"LD_PRELOAD", "LD_LIBRARY_PATH", "BASH_ENV", "ENV", "PATH", "DYLD_INSERT_LIBRARIES",
		"GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF", "PS4", "SHELLOPTS", "NODE_OPTIONS", "PYTHONPATH", "IFS", "PAGER", "HOME",
		"path", "CDPATH", "BASH_ALIASES", "BASH_CMDS", "PWD", "OLDPWD", "FPATH", "EXECIGNORE", "BASH_LOADABLES_PATH", "POSIXLY_CORRECT"} {
		fails = append(fails,
			failCase{v + "=/tmp/x ls", "assignment of " + v},
			failCase{v + "=/tmp/x", "assignment of " + v},
			failCase{"A=1 " + v + "=x git status", "assignment of " + v},
			failCase{"ls && " + v + "=x ls", "assignment of " + v},
			failCase{"env " + v + "=x ls", "env sets " + v},
			failCase{"export " + v + "=x", "export " + v},
			failCase{"export " + v, "export " + v},
			failCase{"for " + v + " in x; do ls; done", "for loop assigns " + v},
		)
	}
	runFail(t, fails)
	runOK(t, []okCase{
		{"FOO=1 ls", []string{"BIN/ls"}},
		{"FOO=1", nil},
		{"FOO=$BAR ls", []string{"BIN/ls"}},
		{"export FOO=1 BAR; ls", []string{"BIN/ls"}},
		{"readonly FOO=1", nil},
		{"env FOO=1 ls", []string{"BIN/ls via=env"}},
	})
}

func TestRedirections(t *testing.T) {
	runOK(t, []okCase{
		{"ls >/dev/null", []string{"BIN/ls"}},
		{"ls 2>/dev/null", []string{"BIN/ls"}},
		{"ls >>/dev/null 2>&1", []string{"BIN/ls"}},
		{"ls </dev/null", []string{"BIN/ls"}},
		{"ls 2>&1 | grep x", []string{"BIN/ls", "BIN/grep"}},
		{"ls <&-", []string{"BIN/ls"}},
		{"ls 3>&-", []string{"BIN/ls"}},
		{"exec 2>&1", nil},
		{"{ ls; } 2>/dev/null", []string{"BIN/ls"}},
		{"cat <<'EOF'\n$(rm x) `rm y`\nEOF", []string{"BIN/cat"}},
		{"cat <<\"EOF\"\n$(rm x)\nEOF", []string{"BIN/cat"}},
		{"cat <<\\EOF\n$(rm x)\nEOF", []string{"BIN/cat"}},
		{"cat <<EOF\nplain $HOME ${x:-y} text\nEOF", []string{"BIN/cat"}},
	})
	runFail(t, []failCase{
		{"ls > out", "redirection >out at 1:4 reads or writes a file"},
		{"git show > ~/.ssh/authorized_keys", "writes a file"},
		{"ls >> .git/hooks/pre-commit", "writes a file"},
		{"ls >| out", "writes a file"},
		{"ls < /etc/passwd", "reads or writes a file"},
		{"ls <> /dev/tty", "reads or writes a file"},
		{"ls > /dev/null/../x", "writes a file"},
		{"ls >& out", "not a file descriptor"},
		{"ls 2>&$fd", "not a file descriptor"},
		{"ls > $OUT", "writes a file"},
		{"{ ls; } > out", "writes a file"},
		{"(ls) > out", "writes a file"},
		{"exec 3>out", "writes a file"},
		{"ls &> /dev/null", "parse error"},
		{"cat <<E\n\\\nE\nrm x\nE", "line ending in a backslash"},
		{"cat <<'E'\na\\\nE\nrm x\nE", "line ending in a backslash"},
		{"cat <<< x", "parse error"},
	})
}

func TestFunctionsAndUnsupportedSyntax(t *testing.T) {
	runFail(t, []failCase{
		{"f() { ls; }", "function definition"},
		{"ls() { rm -rf x; }; ls", "function definition"},
		{"function f { ls; }", "parse error"},
		{"coproc ls", "coproc"},
		{"select x in a; do ls; done", "parse error"},
		{"for ((i=0;i<1;i++)); do ls; done", "parse error"},
		{"ls |& cat", "parse error"},
		{"a=(1 2)", "parse error"},
		{"declare -a x", "declare"},
		{"let x=1", "let"},
		{"local x", "local"},
		{"typeset x", "typeset"},
		{"echo 'unterminated", "parse error"},
		{"ls ;;", "parse error"},
	})
}
