package shellcmd

import (
	"testing"

	"github.com/exechost/exechost/internal/policy"
)

// allowedBy is what the execution host decides for an allowlist-only
// policy: allowed exactly when the analysis succeeded and every segment
// matched a pattern.
func allowedBy(f *fixture, patterns []string, cmd string) (bool, Analysis) {
	a := Analyze(f.expand(cmd), f.env)
	_, ok := policy.MatchAll(patterns, a.Paths(), f.home)
	return a.OK && ok, a
}

// bypassPatterns allowlist the harmless tools; rm, curl, id, sudo, shells
// and interpreters stay off the list.
var bypassPatterns = []string{
	"BIN/ls", "BIN/echo", "BIN/git", "BIN/grep", "BIN/cat", "BIN/sort", "BIN/uniq", "BIN/sed",
	"BIN/printf", "BIN/test", "BIN/true", "BIN/mytool", "BIN/find", "BIN/make",
}

func fixturePatterns(f *fixture) []string {
	out := make([]string, len(bypassPatterns))
	for i, p := range bypassPatterns {
		out[i] = f.expand(p)
	}
	return out
}

// TestBypassCorpusStaysAMiss replays the bypass classes of pitfalls.md
// against an allowlist that holds only harmless tools: every one must be a
// miss (never allowed without a human).
func TestBypassCorpusStaysAMiss(t *testing.T) {
	f := newFixture(t)
	patterns := fixturePatterns(f)
	for _, cmd := range bypassCorpus {
		if ok, a := allowedBy(f, patterns, cmd); ok {
			t.Errorf("bypass allowed: %q → %v", cmd, segSummary(f, a))
		}
	}
}

// TestAllowlistPositiveControls makes sure the bypass test is not vacuous:
// ordinary commands over the same allowlist are allowed.
func TestAllowlistPositiveControls(t *testing.T) {
	f := newFixture(t)
	patterns := fixturePatterns(f)
	for _, cmd := range []string{
		"ls", "ls -la | grep x | sort | uniq -c", "env FOO=1 nice ls", "sh -c 'ls && git status'",
		`echo "a && b" '$(rm x)'`, "cat <<'EOF'\n$(rm x)\nEOF", "timeout 5 make test", "time -p grep x", "nohup ls", "true", "test -f x && cat x", "pwd",
		"find . -name '*.go' -exec grep x {} +", "ls 2>/dev/null || true", "set -e; git status",
		"cd /tmp && git status", "# comment\nls", "FOO=bar ls", "command ls", "exec ls",
	} {
		if ok, a := allowedBy(f, patterns, cmd); !ok {
			t.Errorf("ordinary command not allowed: %q → OK=%v err=%q %v", cmd, a.OK, a.Error, segSummary(f, a))
		}
	}
}

// bypassCorpus holds the bypass classes of pitfalls.md; with only harmless
// tools allowlisted, each must be a miss.
var bypassCorpus = []string{
	// 1. chaining
	"ls; rm x", "ls && rm x", "ls || rm x", "ls | rm x", "ls & rm x", "ls\nrm x", "ls;rm x",
	"ls\n\n\n\n\nrm x", "{ ls; rm x; }", "(ls; (rm x))", "if ls; then rm x; fi", "if ls; then :; else rm x; fi",
	"while ls; do rm x; done", "for i in a; do rm x; done", "case a in b) ls;; *) rm x;; esac", "! rm x",
	// 2. comments and multi-line scripts
	"ls # harmless\nrm x", "# ls\nrm x", "ls #\\\nrm x", "ls \\\r\nrm x", "ls\r\nrm x",
	// 3. command and process substitution, everywhere
	"ls $(rm x)", "ls `rm x`", `ls "$(rm x)"`, "ls \"`rm x`\"", "ls ${x:+$(rm x)}", "ls ${x:-`rm x`}",
	"ls $(( $(rm x) ))", "ls $((x))", "cat <<EOF\n$(rm x)\nEOF", "cat <<EOF\n`rm x`\nEOF", "ls <(rm x)",
	"ls >(rm x)", "X=$(rm x) ls", "for i in $(rm x); do ls; done", "case $(rm x) in *) ls;; esac",
	"ls > $(rm x)", "echo $[x]", "ls ${x=$(rm x)}",
	// 4. environment prefixes
	"LD_PRELOAD=/tmp/x.so ls", "BASH_ENV=/tmp/x sh -c ls", "ENV=/tmp/x sh -c ls", "PATH=/tmp ls",
	"PATH=/tmp; ls", "DYLD_INSERT_LIBRARIES=/tmp/x ls", "GIT_SSH_COMMAND='rm x' git fetch",
	"GIT_EXTERNAL_DIFF=rm git diff", "GIT_PAGER=rm git log", "PAGER=rm git log", "PS4='$(rm x)' sh -xc ls",
	"SHELLOPTS=xtrace ls", "NODE_OPTIONS=--require=/tmp/x ls", "PYTHONPATH=/tmp ls", "IFS=/ ls",
	"export LD_PRELOAD=/tmp/x; ls", "for PATH in /tmp; do ls; done", "for IFS in /; do ls; done", "env LD_PRELOAD=/tmp/x ls", "sudo LD_PRELOAD=/tmp/x ls",
	// 5. wrappers and carriers
	"env rm x", "nice rm x", "nice -n 1 rm x", "nohup rm x", "timeout 5 rm x", "stdbuf -oL rm x",
	"time rm x", "command rm x", "exec rm x", "xargs rm", "xargs -0 rm -f", "ionice -c3 rm x",
	"setsid rm x", "chrt -o 0 rm x", "taskset 1 rm x", "busybox rm x", "toybox rm x",
	`sh -c '$0 "$@"' rm x`, `sh -c '"$@"' sh rm x`, "env -S 'rm x'", "env --split-string='rm x'",
	"env -vS'rm x'", "sh -c 'rm x'", "bash -c 'ls; rm x'", "env -i rm x", "env ls && rm x",
	"nice env FOO=1 timeout 5 rm x", "xargs sh -c 'rm x'", "xargs -I{} sh -c '{}'", "xargs sh",
	"HOME/bin/e rm x", "HOME/bin/sneaky -c 'rm x'", "sudo rm x", "sudo ls", "doas ls", "flock /tmp/l ls",
	"watch ls", "env sh -c 'rm x'", "command -p rm x", "ls | xargs rm", "find . | xargs rm",
	// 7. interpreters
	"python3 -c 'import os'", "node -e x", "perl -e x", "awk 'BEGIN{system(\"rm x\")}'", "ls | awk 1",
	// 9. redirections
	"git show > ~/.ssh/authorized_keys", "ls >> .git/hooks/pre-commit", "echo x > /etc/passwd",
	"cat < /etc/shadow", "ls >& out", "ls 2> out", "ls >| out", "{ ls; } > out", "exec 3> out",
	// 10. path-qualified names
	"./sed p notes", "WORK/sed", "link/../x", "sub/build", "~/bin/tool", "cd sub && ./build",
	// 12. login shells and rc files
	"bash -l -c ls", "bash --login -c ls", "bash -i -c ls", "sh -lc ls", "bash --rcfile /tmp/x -c ls",
	"bash x.sh", "sh < script", "bash", "echo rm x | sh", "sh <<EOF\nrm x\nEOF", "cat x | bash -s",
	// 15. constructs where parsers disagree, and dynamic execution
	"((rm x))", "{rm,x}", "$'\\x72m' x", "[[ -f x ]]", "a[$(rm x)]=1", "eval 'rm x'", "source ./x", ". ./x",
	"alias ls=rm\nls", "f() { rm x; }; f", "trap 'rm x' EXIT; ls", "set -k; ls LD_PRELOAD=x", "$CMD",
	"l$S", "${CMD:-rm} x", "\"$@\"", "`echo rm` x", "coproc rm x", "function f { rm x; }",
	"ls x\\\n; rm x",
}
