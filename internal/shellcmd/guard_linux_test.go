//go:build linux

package shellcmd_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/shellcmd"
	"github.com/exechost/exechost/internal/testdep"
	"github.com/exechost/exechost/internal/testproc"
)

// TestGuardAloneUnderStrace proves the run-time guard on its own: the
// exechost binary is built with the exechost_analysis_off and
// exechost_jail_off tags (test-only builds; no release binary has them:
// the jail's own set-up would show in the trace as writes), so every
// parseable text of the
// project's corpora is taken as allowed and goes straight to the guarded
// interpreter, with only the allowlist's literal paths allowed. Under
// strace, whatever ran: no program outside the allowlist started, no
// program started with an environment the policy refuses, and no file was
// created anywhere but the state directory and the run's own temporary
// directory (which the interpreter leaves empty).
func TestGuardAloneUnderStrace(t *testing.T) {
	if testing.Short() {
		t.Skip("runs about a thousand traced commands")
	}
	straceBin := testdep.Binary(t, "strace")
	root := t.TempDir()
	bin, err := testproc.Build(root, false, "-tags", "exechost_analysis_off,exechost_jail_off")
	if err != nil {
		t.Fatal(err)
	}
	stubs, planted, work, state, allowed := traceHost(t, root, bin)
	var texts []string
	texts = append(texts, shellcmd.DifferentialCorpus...)
	texts = append(texts, shellcmd.BypassCorpus...)
	texts = append(texts, shellcmd.AttackCorpus...)
	// The whole attack corpus, and a share of the generated commands
	// (the trace test of the normal binary runs all 500).
	texts = append(texts, shellcmd.GeneratedCommands(1, 150)...)

	results := make([]guardTrace, len(texts))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = traceGuard(straceBin, bin, state, work, planted+":"+stubs, texts[i], allowed)
			}
		}()
	}
	for i := range texts {
		next <- i
	}
	close(next)
	testproc.WaitGroup(t, &wg, "the guarded runs")

	ran, refused := 0, 0
	for _, r := range results {
		if r.err != nil {
			t.Errorf("%q: %v", r.text, r.err)
			continue
		}
		if r.ran {
			ran++
		}
		if r.refused {
			refused++
		}
		for _, bad := range r.bad {
			t.Errorf("%q: %s", r.text, bad)
		}
	}
	t.Logf("%d texts straight to the guard: %d ran allowlisted programs, %d were refused at run time", len(texts), ran, refused)
	// The harness must see what it claims to catch: with the guard's
	// allowlist widened to everything (security=full runs the text as
	// shell text), the same checks flag a planted wrapper starting, a
	// refused environment and a file written outside.
	full := filepath.Join(root, "full")
	if err := os.MkdirAll(full, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "exec-approvals.json"), []byte(`{"version":1,"defaults":{"security":"full","ask":"off"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// The file goes where the run may write (its cwd) but the harness
	// flags: written outside, where confinement refuses it, the create
	// fails and nothing is created to flag.
	outside := filepath.Join(work, "control-created")
	t.Cleanup(func() { os.Remove(outside) })
	r := traceGuard(straceBin, bin, full, work, planted+":"+stubs, "time rm x; ZIPOPT=1 ls; : > "+outside, allowed)
	if kinds := flagKinds(r.bad); r.err != nil || kinds["program"] == 0 || kinds["environment"] == 0 || kinds["file"] == 0 {
		t.Errorf("control under security=full: %q (err %v, kinds %v); the harness must flag a program, an environment and a file, one of each at least", r.bad, r.err, kinds)
	}
	if ran < 150 || refused < 50 {
		t.Errorf("only %d texts ran allowlisted programs and %d were refused; the trace proves little", ran, refused)
	}
}

// flagKinds counts traceGuard's flagged items by kind: a program that
// should not have started, one started with a refused environment, and a
// file created outside the allowed places (or left in the run's tmp).
func flagKinds(bad []string) map[string]int {
	kinds := map[string]int{}
	for _, b := range bad {
		switch {
		case strings.HasPrefix(b, "started ") && strings.Contains(b, " with env "):
			kinds["environment"]++
		case strings.HasPrefix(b, "started "):
			kinds["program"]++
		default:
			kinds["file"]++
		}
	}
	return kinds
}

type guardTrace struct {
	text         string
	ran, refused bool
	bad          []string
	err          error
}

var (
	// envpOf matches the environment array at the end of a verbose
	// strace execve line.
	envpOf  = regexp.MustCompile(`\], \[(.*)\]\) = 0$`)
	envName = regexp.MustCompile(`"([A-Za-z_][A-Za-z0-9_]*)=`)
	// createOK matches a successful call that creates a name in the file
	// system; the path is the first quoted argument.
	createOK = regexp.MustCompile(`^(creat|mkdir|mkdirat|mknod|mknodat|link|linkat|symlink|symlinkat|rename|renameat|renameat2|open|openat)\((?:AT_FDCWD(?:<[^>]*>)?, |\d+(?:<[^>]*>)?, )?"((?:[^"\\]|\\.)*)"(.*)\) = \d+`)
)

// traceGuard runs one text through `exechost run` under strace, with
// TMPDIR a fresh directory, and reports what the guard let through.
func traceGuard(straceBin, bin, state, work, path, text string, allowed map[string]bool) (o guardTrace) {
	o.text = text
	dir, err := os.MkdirTemp("", "guard-")
	if err != nil {
		o.err = err
		return o
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		o.err = err
		return o
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, straceBin, "-ff", "-qq", "-y", "-v", "-s", "512", "--seccomp-bpf",
		"-e", "trace=execve,dup2,dup3,fcntl,creat,open,openat,mkdir,mkdirat,mknod,mknodat,link,linkat,symlink,symlinkat,rename,renameat,renameat2",
		"-e", "signal=none", "-o", filepath.Join(dir, "t"), bin, "run", "--state-dir", state, "--cwd", work, "--timeout", "10", "--", text)
	cmd.Dir = work
	cmd.Env = []string{"PATH=" + path, "HOME=" + work, "LC_ALL=C", "TMPDIR=" + tmp}
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		o.err = fmt.Errorf("timed out: %s", out)
		return o
	}
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 126 && strings.Contains(string(out), "refused at run time") {
		o.refused = true
	}
	hostEnv := map[string]bool{"PATH": true, "HOME": true, "LC_ALL": true, "TMPDIR": true}
	files, _ := filepath.Glob(filepath.Join(dir, "t.*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			o.err = err
			return o
		}
		fds := map[string]string{}
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if m := dupTo.FindStringSubmatch(line); m != nil {
				noteDup(fds, m)
				continue
			}
			if m := execveOK.FindStringSubmatch(line); m != nil {
				p := startedFile(m[1], fds) // the file decided on, handed over by descriptor
				switch {
				case !allowed[p]:
					o.bad = append(o.bad, "started "+p)
				case p != bin:
					o.ran = true
					if e := envpOf.FindStringSubmatch(line); e != nil {
						for _, n := range envName.FindAllStringSubmatch(e[1], -1) {
							if !hostEnv[n[1]] && !policy.EnvPermitted(n[1], nil) {
								o.bad = append(o.bad, fmt.Sprintf("started %s with env %s", p, n[1]))
							}
						}
					}
				}
				continue
			}
			m := createOK.FindStringSubmatch(line)
			if m == nil || ((m[1] == "open" || m[1] == "openat") && !strings.Contains(m[3], "O_CREAT")) {
				continue
			}
			p := m[2]
			if strings.HasPrefix(p, state+"/") || strings.HasPrefix(p, tmp+"/") || strings.HasPrefix(p, "/dev/") {
				continue
			}
			o.bad = append(o.bad, m[1]+" "+p)
		}
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		o.bad = append(o.bad, fmt.Sprintf("left %d entries in the run's temporary directory", len(ents)))
	}
	return o
}
