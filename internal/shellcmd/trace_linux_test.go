//go:build linux

package shellcmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/shellcmd"
	"github.com/exechost/exechost/internal/testdep"
	"github.com/exechost/exechost/internal/testproc"
)

// harmlessTools are allowlisted in the trace test; every other stand-in
// (rm, id, shells, wrappers, interpreters, …) is not.
var harmlessTools = []string{
	"out", "err", "fail", "up", "showenv", "ls", "echo", "git", "grep", "cat", "sort", "uniq",
	"sed", "printf", "test", "true", "mytool", "find", "make", "date", "head",
}

// otherTools are on PATH but never allowlisted.
var otherTools = []string{
	"rm", "id", "curl", "kill", "jobs", "sh", "bash", "dash", "zsh", "ksh", "python3", "node", "perl",
	"awk", "env", "nice", "nohup", "timeout", "stdbuf", "time", "xargs", "ionice", "setsid", "chrt",
	"taskset", "sudo", "doas", "busybox", "flock", "watch", "build",
}

// plantedWrappers sit in a directory before the stand-ins on PATH: files
// named like wrappers that the runner applies itself, which must never run.
var plantedWrappers = []string{"time", "nice", "env", "timeout", "nohup", "jobs", "command", "exec"}

// writeStub writes a stand-in that prints its name and arguments using
// shell builtins only (so it execs nothing the trace would have to
// excuse): up copies its input with a prefix, fail exits with its first
// argument, err prints on stderr, showenv prints one variable.
func writeStub(t *testing.T, dir, name string) {
	t.Helper()
	body := `echo "` + name + `:$*"`
	switch name {
	case "up":
		body = `while IFS= read -r l; do echo "up:$l"; done`
	case "fail":
		body = `exit "${1:-1}"`
	case "err":
		body = `echo "err:$*" >&2`
	case "showenv":
		body = `eval "v=\${$1-unset}"; echo "$1=$v"`
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// execveOK matches a successful execve in strace's output.
var execveOK = regexp.MustCompile(`^execve\("((?:[^"\\]|\\.)*)", .*\) = 0$`)

// dupTo matches, under strace -y, a duplication onto a descriptor with
// the file it names: how the runner and the interpreter hand a child the
// executable they decided on (runner.ChildFD, started as /proc/self/fd/3),
// and how the jail hands its warm interpreter the file it is
// (runner.BaseFD). When the file already is that descriptor, the child
// only clears its close-on-exec flag: fcntl F_SETFD.
var dupTo = regexp.MustCompile(`^(?:dup[23]\(\d+<((?:[^>\\]|\\.)*)>, (\d+)[,)<]|fcntl\((\d+)<((?:[^>\\]|\\.)*)>, F_SETFD)`)

// noteDup records in fds (descriptor to file) what a dupTo match put where.
func noteDup(fds map[string]string, m []string) {
	if m[2] != "" {
		fds[m[2]] = m[1]
	} else {
		fds[m[3]] = m[4]
	}
}

var procSelfFD = regexp.MustCompile(`^/proc/self/fd/(\d+)$`)

// startedFile is the file an execve of p started: p itself, or for
// /proc/self/fd/N the file the process had put on N.
func startedFile(p string, fds map[string]string) string {
	m := procSelfFD.FindStringSubmatch(p)
	if m == nil {
		return p
	}
	if f := fds[m[1]]; f != "" {
		return f
	}
	return p + " (unknown file)"
}

// executed returns the file each successful execve of one traced process
// started (startedFile).
func executed(trace string) []string {
	var out []string
	fds := map[string]string{}
	for _, line := range strings.Split(trace, "\n") {
		line = strings.TrimSpace(line)
		if m := dupTo.FindStringSubmatch(line); m != nil {
			noteDup(fds, m)
			continue
		}
		if m := execveOK.FindStringSubmatch(line); m != nil {
			out = append(out, startedFile(m[1], fds))
		}
	}
	return out
}

// TestAllowedTextsStartOnlyAllowlisted runs every text of the project's
// corpora (the differential corpus, the bypass classes of pitfalls.md, the
// attacks of issue 11 and 500 generated commands) through the real
// `exechost run` under strace, on a host whose allowlist holds only
// harmless stand-ins and whose PATH has files named like wrappers planted
// first. Whatever the decision, every program that actually started must
// be the exechost binary itself or an allowlisted stand-in: this is checked
// by watching execve, not by asking the analysis again.
func TestAllowedTextsStartOnlyAllowlisted(t *testing.T) {
	if testing.Short() {
		t.Skip("runs about a thousand traced commands")
	}
	straceBin := testdep.Binary(t, "strace")
	root := t.TempDir()
	bin := exechostBinary(t)
	stubs, planted, work, state, allowed := traceHost(t, root, bin)
	var texts []string
	texts = append(texts, shellcmd.DifferentialCorpus...)
	texts = append(texts, shellcmd.BypassCorpus...)
	texts = append(texts, shellcmd.AttackCorpus...)
	texts = append(texts, shellcmd.GeneratedCommands(1, 500)...)
	env := []string{"PATH=" + planted + ":" + stubs, "HOME=" + work, "LC_ALL=C"}

	results := make([]traced, len(texts))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = traceOne(straceBin, bin, state, work, env, texts[i], allowed)
			}
		}()
	}
	for i := range texts {
		next <- i
	}
	close(next)
	testproc.WaitGroup(t, &wg, "the traced runs")

	ran := 0
	for _, r := range results {
		if r.err != nil {
			t.Errorf("%q: %v", r.text, r.err)
			continue
		}
		if r.ran {
			ran++
		}
		if len(r.bad) > 0 {
			t.Errorf("%q started programs outside the allowlist: %q", r.text, r.bad)
		}
	}
	t.Logf("%d texts traced, %d of them ran allowlisted programs", len(texts), ran)
	// Negative control: the same harness on a host with security=full must
	// see the unallowlisted programs start, or it sees nothing at all.
	full := filepath.Join(root, "full")
	if err := os.MkdirAll(full, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "exec-approvals.json"), []byte(`{"version":1,"defaults":{"security":"full","ask":"off"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := traceOne(straceBin, bin, full, work, env, "time rm x; jobs", allowed); r.err != nil || len(r.bad) == 0 {
		t.Errorf("control under security=full: started %q (err %v); the harness must see rm and the planted wrappers start", r.bad, r.err)
	}
	// The test would pass vacuously if nothing ran.
	if ran < 300 {
		t.Errorf("only %d texts started an allowlisted program; the trace proves little", ran)
	}
}

// traced is what one traced run started.
type traced struct {
	text string
	ran  bool     // an allowlisted stand-in started
	bad  []string // programs that started but are not allowed
	err  error
}

// traceOne runs one text through `exechost run` under strace and returns
// the programs it started that are not allowed.
func traceOne(straceBin, bin, state, work string, env []string, text string, allowed map[string]bool) (o traced) {
	o.text = text
	dir, err := os.MkdirTemp("", "trace-")
	if err != nil {
		o.err = err
		return o
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, straceBin, "-ff", "-qq", "-y", "--seccomp-bpf", "-e", "trace=execve,dup2,dup3,fcntl", "-e", "signal=none",
		"-o", filepath.Join(dir, "t"), bin, "run", "--state-dir", state, "--cwd", work, "--timeout", "10", "--", text)
	cmd.Dir, cmd.Env = work, env
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		o.err = fmt.Errorf("timed out: %s", out)
		return o
	}
	_ = err // the command's own exit status is not what this test checks
	files, _ := filepath.Glob(filepath.Join(dir, "t.*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			o.err = err
			return o
		}
		for _, p := range executed(string(b)) {
			if !allowed[p] {
				o.bad = append(o.bad, p)
			} else if p != bin {
				o.ran = true
			}
		}
	}
	return o
}

// traceHost lays out the traced host under root: stand-ins on a PATH with
// files named like wrappers planted first, a work directory, and a state
// directory whose exec-approvals.json allowlists only the harmless
// stand-ins (security=allowlist, ask=off). allowed holds the files that
// may start: bin and those stand-ins.
func traceHost(t *testing.T, root, bin string) (stubs, planted, work, state string, allowed map[string]bool) {
	t.Helper()
	stubs, planted, work, state = filepath.Join(root, "stubs"), filepath.Join(root, "planted"), filepath.Join(root, "work"), filepath.Join(root, "state")
	for _, d := range []string{stubs, planted, filepath.Join(work, "sub"), state} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range append(append([]string{}, harmlessTools...), otherTools...) {
		writeStub(t, stubs, n)
	}
	for _, n := range plantedWrappers {
		writeStub(t, planted, n)
	}
	writeStub(t, filepath.Join(work, "sub"), "build")
	if err := os.WriteFile(filepath.Join(work, "here.txt"), []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	allowed = map[string]bool{bin: true}
	var patterns []map[string]string
	for _, n := range harmlessTools {
		p := filepath.Join(stubs, n)
		allowed[p] = true
		patterns = append(patterns, map[string]string{"pattern": p})
	}
	file := map[string]any{
		"version":  1,
		"defaults": map[string]string{"security": "allowlist", "ask": "off", "askFallback": "deny"},
		"agents":   map[string]any{"*": map[string]any{"allowlist": patterns}},
	}
	b, _ := json.Marshal(file)
	if err := os.WriteFile(filepath.Join(state, "exec-approvals.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}

	return stubs, planted, work, state, allowed
}
