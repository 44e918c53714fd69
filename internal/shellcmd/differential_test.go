package shellcmd

import (
	"context"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/testdep"
)

// differentialCorpus is run for real under /bin/sh and bash with a PATH of
// logging stand-ins, so it must stay harmless: no writes outside the
// temporary working directory, no kill, no exec of real programs.
var differentialCorpus = []string{
	"ls; rm x", "ls && rm x || id", "ls | grep x | sort", "true & ls; wait",
	"ls # c\nrm x", "ls #\\\nid", "# c\nls", "ls #\\\\\nid", "echo a#b; ls", "ls \\\n x; id",
	"echo 'a\\\nb'; ls", "echo \"a\\\nb\"; ls", "cat <<'E'\na\\\nE\nls\nE\nid", "cat <<E\na\\\nE\nls\nE\nid",
	"cat <<-E\n\tls\n\tE\nid", "cat <<E; ls\nbody\nE\nid", "cat <<A <<B\na\nA\nb\nB\nls",
	"if ls; then id; else rm x; fi", "case a in a) ls;; *) rm x;; esac", "for i in 1 2; do ls; done",
	"{ ls; id; }", "(ls; (id))", "! ls", "ls 2>/dev/null >/dev/null </dev/null", "ls 2>&1 | cat",
	"FOO=1 ls", "env FOO=1 ls", "nice -n 1 ls", "timeout 5 ls", "command ls", "xargs ls </dev/null",
	"sh -c 'ls; id'", "sh -c \"ls && id\"", "cd sub && ./build", "cd sub && ls; id", "echo '$(rm x)' \"\\$(id)\"",
	"echo a\\;rm x", "echo a\\\nls", "ls\\\n;id", "set -e; ls; id", ": x; ls", "export A=1; ls", "ls ;; id",
	"echo \"x # y\"; ls", "test -f x || [ -d y ] && ls", "printf '%s' x; ls", "echo ~; ls", "echo *; ls",
	"ls \t ; \t id", "ls&&id", "ls||id", "ls|id", "ls&id;wait", "ls;;", "ls\n\n;\nid",
	"case x in (x) ls;; esac", "cat <<E\"F\"\nx\nEF\nls", "cat <<E\nx\nE \nls\nE\nid", "cat <<E\nx\n E\nls\nE\nid",
	"cat <<-E\n  x\n  E\nls\nE\nid", "cat <<E | grep x\nbody\nE\nls", "cat <<E; id\nbody\nE", "ls; #c ;id",
	"echo \\#; id", "ls &&\n# c\nid", "ls &&\n\nid", "if ls\nthen id\nfi", "ls \\", "{ls;}", "!ls", "ls ||\nid",
	"for i do ls; done", "cat <<E\n\\\nE\nls\nE\nid", "cat <<\\\nE\nx\nE\nls", "echo ${x:-a\nb}; id",
	"echo ${x:-'}'}; id", "echo \"${x:-\"a b\"}\"; id", "echo \"${x:-'}'}\"; id", "a=b\nls", "time ls; id",
	"echo \u00a0; ls\u00a0;id", "ls\u00a0id", "echo ')' ; id", "echo \\'; id", "echo \"\\\"\"; id",
	"case x in x) ls ;; esac; id", "case x in x|y) ls; esac", "ls; }", "{ ls; } ; id", "ls & & id", "(ls) (id)",
	"echo \"${x#\"}\"}\"; id", "echo ${x:-\\}}; id", "echo \"${x:-\\}}\"; id", "echo ${x-'a;b'}; id",
	"echo \"$x\"\\\"; id", "echo '\\''; id", "echo a'b'\"c\"\\d; id", "echo $; id", "echo $ ; id", "echo \"$\"; id",
	"echo ${#}; id", "echo ${##}; id", "echo ${#x}; id", "echo ${x%%*}; id", "cat <<E\n${x:-E}\nE\nid",
	"ls 2>/dev/null&id;wait", "ls>/dev/null;id", "ls 1>&2;id", "ls<&0;id", "echo }; id", "echo {; id", "echo { }; id",
	"echo #x\nid", "echo x# y; id", "echo '#'; id", "ls <<E\nE", "cat << E\nx\nE\nid", "cat <<E\nx\nE\n\nid",
}

// TestDifferentialAgainstRealShells runs every corpus text whose analysis
// succeeds under the real shells and checks that each program they
// actually started is one the analysis reported (as a segment or a wrapper
// or shell it looked through). This guards against the parser and the shell
// disagreeing (pitfall 15), which is how hidden commands slip through.
func TestDifferentialAgainstRealShells(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no POSIX shell on windows")
	}
	shells := [][]string{{"/bin/sh", "-c"}}
	if bash, err := exec.LookPath("bash"); err == nil {
		shells = append(shells, []string{bash, "-c"}, []string{bash, "--posix", "-c"})
	} else {
		testdep.Missing(t, "bash", "the differential test compares the analysis with bash as well as /bin/sh")
	}
	f := newFixture(t)
	logBin := filepath.Join(f.root, "logbin")
	mkdir(t, logBin)
	logFile := filepath.Join(f.root, "log")
	for _, n := range append(fixtureTools, "build") {
		if strings.Contains(n, "[") {
			continue
		}
		script := "#!/bin/sh\necho " + n + " >> \"$DIFF_LOG\"\n"
		if err := os.WriteFile(filepath.Join(logBin, n), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.work, "sub", "build"), []byte("#!/bin/sh\necho build >> \"$DIFF_LOG\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := Env{Cwd: f.work, PATH: logBin, Home: f.home}
	for _, text := range differentialCorpus {
		a := Analyze(text, env)
		if !a.OK {
			continue
		}
		known := map[string]bool{}
		for _, s := range a.Segments {
			known[path.Base(s.ResolvedPath)] = true
			known[path.Base(s.Name)] = true
			for _, v := range s.Via {
				known[path.Base(v)] = true
			}
		}
		for _, sh := range shells {
			os.Remove(logFile)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			cmd := exec.CommandContext(ctx, sh[0], append(sh[1:], text)...)
			cmd.Dir = f.work
			cmd.Env = []string{"PATH=" + logBin, "HOME=" + f.home, "DIFF_LOG=" + logFile}
			_ = cmd.Run() // exit status is irrelevant; what ran is in the log
			cancel()
			b, _ := os.ReadFile(logFile)
			for _, ran := range strings.Fields(string(b)) {
				if !known[ran] {
					t.Errorf("%s ran %q for %q, but the analysis reported only %v", sh[0], ran, text, segSummary(f, a))
				}
			}
		}
	}
}
