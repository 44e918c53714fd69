package shellcmd

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// attackCorpus holds the texts that made /bin/sh run an unallowlisted
// program while the analysis (reading them with another parser) allowed
// them, one or more per class of issue 11: builtins that execute their
// arguments in bash, here-document delimiters and terminators the parsers
// disagree on, a multibyte locale re-tokenising bytes, and wrappers trusted
// by name. With the tree the analysis read being the tree that runs, each
// is either refused or runs only what the analysis allowed; the trace test
// checks that by running them.
var attackCorpus = []string{
	// bash's jobs -x runs its arguments.
	"jobs -x rm x", "bash -c 'jobs -x rm x'", "command jobs -x rm x", "bash --posix -c 'jobs -x rm x'",
	"sh -c 'jobs -x rm x'", "ls; jobs -x rm x",
	// Here-document delimiters with quoting the parsers read differently.
	"cat <<\"E\\$\"\nls\nE$\nrm x\nE\\$\nls", "cat <<\"E\\\\\"\nls\nE\\\nrm x\nE\\\\\nls",
	"cat <<\"E\\`\"\nls\nE`\nrm x\nE\\`\nls", "cat <<\"E\\\"\"\nls\nE\"\nrm x\nE\\\"\nls",
	"cat <<'E'#\nls\nE\nrm x\nE'#'\nls", "cat <<\"E\"#c\nls\nE\nrm x", "cat <<E#\nls\nE#\nrm x\nE\nls",
	// Terminator lines after an expansion.
	"cat <<E\n${x}E\nrm x\nE\nls", "cat <<E\n$?E\nrm x\nE\nls", "cat <<E\n$((1))E\nrm x\nE\nls",
	"cat <<-E\n\t${x}E\nrm x\n\tE\nls", "cat <<E\n${x:-y}E\nrm x\nE", "cat <<E\n$#E\nrm x\nE",
	// A multibyte locale makes bash read 0x5c inside a character as a quote.
	"LC_ALL=zh_CN.GBK bash -c 'echo \xa5\\'; rm x'", "LC_ALL=zh_TW.BIG5 bash -c \"echo \xa5\\\\\"; rm x\"",
	"LC_ALL=ja_JP.SJIS sh -c 'ls \x95\\'; rm x'", "LANG=zh_CN.GBK bash -c 'ls \xa5\\'",
	// Wrappers trusted by name: a planted file of that name earlier on PATH.
	"time ls", "nice ls", "env ls", "timeout 5 ls", "nohup ls", "time -p nice -n 1 env A=1 timeout 5 ls",
	"env -i ls", "command time ls", "exec nice ls", "sh -c 'time ls'",
	// Issue 25: here-document delimiters partly quoted (literal to every
	// shell, expanded by the interpreter).
	"cat <<'A'B\n$(rm x)\nAB", "cat <<\"E\"OF\n$(rm x)\nEOF", "cat <<''EOF\n$(rm x)\nEOF",
	"cat <<-'A'B\n\t$(rm x)\n\tAB", "cat <<E\\OF\n$(rm x)\nEOF", "cat <<'E'\"OF\"x\n`rm x`\nEOFx",
	// Builtins run through command, which the call handler once did not see.
	"command eval 'rm x'", "command builtin eval 'rm x'", "command . ./here.txt", "command command eval 'rm x'",
	// The interpreter's own temporary files, and the environment of what it starts.
	"TMPDIR=/tmp; printf '\\101' > /tmp/sh-interp-x; cat /tmp/sh-interp-x",
	"LD_PRELOAD=/tmp/sh-interp-x cat here.txt", "export LD_PRELOAD=/tmp/x; cat here.txt",
	"ZIPOPT='-TT rm' cat here.txt", "TAR_OPTIONS=--to-command=rm cat here.txt", "MAKEFLAGS=x make",
	"env GCONV_PATH=/tmp cat here.txt",
	// A refusal inside a command substitution; wrappers around a nested shell.
	"cat \"$(rm x)\"; cat here.txt", "timeout 5 sh -c 'rm x'", "nice sh -c 'cat here.txt; rm x'",
	// A second round written from outside the corpus above, with only
	// harmless stand-ins allowed: functions, aliases, dynamic names,
	// positional and read-in names, files the interpreter might write,
	// wrappers with file-writing options, shells reading scripts.
	"f() { rm x; }; f", "alias cat=rm; cat x", "PATH=/tmp:$PATH cat here.txt", "cd sub && ./build",
	"exec rm x", "command -p rm x", "hash -p /bin/rm cat; cat x", "set -o posix; rm x",
	"trap 'rm x' EXIT; cat here.txt", "cat here.txt & rm y; wait", "${x:-rm} y", "\"r\"\"m\" x", "\\rm x",
	"cat $(printf 'rm') x", "x=rm; $x y", "IFS=/; cat here.txt", "set -- rm x; \"$@\"", "read -r x <<< rm; $x",
	"printf -v x rm; $x", "eval \"$(printf 'rm x')\"", "cat /dev/null > /tmp/pwned", "cat here.txt >> ~/.bashrc",
	"cat here.txt 1>/tmp/x", "exec 3>/tmp/x; cat here.txt >&3", "BASH_ENV=/tmp/x bash -c cat", "LD_AUDIT=/tmp/x.so cat here.txt",
	"GCONV_PATH=. cat here.txt", "env -S 'rm x'", "time -o /tmp/x cat here.txt", "timeout --foreground 1 rm x",
	"nice -n -20 cat here.txt", "nohup cat here.txt", "sh -c 'rm x' sh", "sh -s <<< 'rm x'", "sh /tmp/script",
	"env sh -c 'rm x'", "cat <<-EOF\n\t$(rm x)\nEOF", ": ${x:=$(rm x)}", ": $((x[$(rm x)]))", "test -v 'a[$(rm x)]'",
	"cat here.txt\nrm y", "cat here.txt;rm y", "cat 'here.txt' # ; rm y", "cat here.txt \\\nrm y",
	"LANG=C cat here.txt | sort | rm -f x", "cat here.txt | xargs rm", "find . -name x -exec rm {} \\;",
	"git -c core.pager='rm x' log", "make -f /dev/stdin <<< 'x:;rm x'", "sed -n '1e rm x' here.txt",
	"export TMPDIR=/tmp; cat here.txt > $TMPDIR/sh-interp-1", "TERM=xterm LC_ALL=C TZ=UTC cat here.txt",
}

// commandGenerator makes allowlist-able commands of the shapes agents send
// (chains, pipelines, cd d &&, here-documents, if/for/case/while, groups,
// redirections to /dev/null, applied wrappers, shell -c payloads, builtins)
// over the stand-in programs of the fidelity test: out (prints its
// arguments), err (prints them on stderr), fail N (exits N), up (prints its
// input lines with a prefix) and showenv NAME.
type commandGenerator struct{ r *rand.Rand }

// generatedCommands returns n commands, the same ones for the same seed.
func generatedCommands(seed uint64, n int) []string {
	g := commandGenerator{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	out := make([]string, 0, n)
	seen := map[string]bool{}
	for len(out) < n {
		c := g.list(2)
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

func (g commandGenerator) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

func (g commandGenerator) word() string {
	return g.pick("a", "b-c", "'x y'", "\"q $HOME\"", "\"$x\"", "dir/file", "'*'", "*.txt", "1", "--flag", "\"\"", "'$(no)'")
}

func (g commandGenerator) words(max int) string {
	var ws []string
	for i := g.r.IntN(max + 1); i > 0; i-- {
		ws = append(ws, g.word())
	}
	return strings.Join(ws, " ")
}

func (g commandGenerator) simple() string {
	switch g.r.IntN(17) {
	case 0, 1, 2:
		return strings.TrimSpace("out " + g.words(3))
	case 3:
		return strings.TrimSpace("err " + g.words(2))
	case 4:
		return fmt.Sprintf("fail %d", g.r.IntN(4))
	case 5:
		return "echo " + g.pick("hello", "a b  c", "'two  spaces'", "\"$x\"", "$HOME", "x=1")
	case 6:
		return "printf '%s|' " + g.words(3)
	case 7:
		return g.pick("true", "false", ":", "pwd")
	case 8:
		return g.pick("test -f here.txt", "[ -d sub ]", "test -n \"$x\"", "[ a = b ]", "test -z ''")
	case 9:
		return "x=" + g.pick("1", "'v w'", "$HOME") + "; out \"$x\""
	case 10:
		return g.pick("FOO=bar showenv FOO", "env FOO=baz showenv FOO", "export FOO=q; showenv FOO", "env -u HOME showenv HOME")
	case 11:
		return g.pick("nice out n", "nice -n 5 out n", "timeout 5 out t", "nohup out h", "env out e", "timeout 5 env A=1 showenv A")
	case 12:
		return "sh -c '" + g.pick("out p; out q", "fail 2", "out $1", "echo in") + "'" + g.pick("", " arg1")
	case 13:
		// In a subshell: a second cd into sub would fail, and failing
		// builtins report differently (docs/policy.md).
		return g.pick("(cd sub && pwd)", "(cd sub && out x)", "(cd sub && pwd); pwd")
	case 14:
		return g.pick("up <<'E'\nline $x\nE", "up <<E\nline $HOME\nE", "up <<-E\n\tindented\n\tE")
	case 15:
		return "out r " + g.pick(">/dev/null", "2>/dev/null", ">&2", "2>&1", "</dev/null")
	default:
		return g.pick("echo $?", "fail 3; echo $?", "! fail 1; echo $?", "(exit 4); echo $?")
	}
}

func (g commandGenerator) list(depth int) string {
	if depth == 0 {
		return g.simple()
	}
	a, b := g.list(depth-1), g.list(depth-1)
	switch g.r.IntN(12) {
	case 0:
		return a + " && " + b
	case 1:
		return a + " || " + b
	case 2:
		return a + "; " + b
	case 3:
		return g.simple() + " | up"
	case 4:
		return g.simple() + " 2>&1 | up | up"
	case 5:
		return "{ " + a + "; " + b + "; }"
	case 6:
		return "(" + a + "; " + b + ")"
	case 7:
		return "if " + g.simple() + "; then " + a + "; else " + b + "; fi"
	case 8:
		return "for i in " + g.words(3) + "; do out \"$i\"; done"
	case 9:
		return "case " + g.pick("a", "b", "\"$x\"") + " in a) " + a + ";; *) " + b + ";; esac"
	case 10:
		return a + "\n" + b
	default:
		return g.simple()
	}
}
