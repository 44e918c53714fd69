//go:build unix

package runner

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/testdep"
	"github.com/exechost/exechost/internal/testproc"
	"github.com/google/go-cmp/cmp"
)

// outcome is the part of a Result tests compare with cmp.Diff.
type outcome struct {
	ExitCode  int
	TimedOut  bool
	Success   bool
	Stdout    string
	Stderr    string
	Truncated bool
	Error     string
}

func outcomeOf(r Result) outcome {
	return outcome{r.ExitCode, r.TimedOut, r.Success, r.Stdout, r.Stderr, r.Truncated, r.Error}
}

func realTempDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRun(t *testing.T) {
	dir := realTempDir(t)
	tests := []struct {
		name string
		spec Spec
		want outcome
	}{
		{
			name: "argv",
			spec: Spec{Argv: []string{"echo", "hello", "world"}},
			want: outcome{Success: true, Stdout: "hello world\n"},
		},
		{
			name: "argv is not shell text",
			spec: Spec{Argv: []string{"printf", "%s|", "a b", "$HOME", "; echo x", "*"}},
			want: outcome{Success: true, Stdout: "a b|$HOME|; echo x|*|"},
		},
		{
			name: "shell text",
			spec: Spec{Command: "echo out && echo err >&2; exit 3"},
			want: outcome{ExitCode: 3, Stdout: "out\n", Stderr: "err\n"},
		},
		{
			name: "exit 0 through the shell",
			spec: Spec{Command: "true"},
			want: outcome{Success: true},
		},
		{
			name: "exit 1",
			spec: Spec{Argv: []string{"false"}},
			want: outcome{ExitCode: 1},
		},
		{
			name: "exit 255",
			spec: Spec{Command: "exit 255"},
			want: outcome{ExitCode: 255},
		},
		{
			name: "death by SIGTERM",
			spec: Spec{Command: "echo before; kill -TERM $$; echo after"},
			want: outcome{ExitCode: 143, Stdout: "before\n", Error: "killed by signal 15 (terminated)"},
		},
		{
			name: "death by SIGKILL",
			spec: Spec{Command: "kill -KILL $$"},
			want: outcome{ExitCode: 137, Error: "killed by signal 9 (killed)"},
		},
		{
			name: "cwd",
			spec: Spec{Command: "pwd", Cwd: dir},
			want: outcome{Success: true, Stdout: dir + "\n"},
		},
		{
			name: "stdin is empty, not inherited",
			spec: Spec{Argv: []string{"cat"}},
			want: outcome{Success: true},
		},
		{
			name: "env overlay",
			spec: Spec{Command: `printf '%s' "$GREETING"`, Env: map[string]string{"GREETING": "hi there"}},
			want: outcome{Success: true, Stdout: "hi there"},
		},
		{
			name: "overlay replaces the base value",
			spec: Spec{Argv: []string{"/usr/bin/env"}, BaseEnv: []string{"A=1", "GREETING=base", "Z=2"}, Env: map[string]string{"GREETING": "overlay"}},
			want: outcome{Success: true, Stdout: "A=1\nZ=2\nGREETING=overlay\n"},
		},
		{
			name: "base env replaces the runner's",
			spec: Spec{Argv: []string{"/usr/bin/env"}, BaseEnv: []string{"ONLY=1"}},
			want: outcome{Success: true, Stdout: "ONLY=1\n"},
		},
		{
			name: "shell start-up variables are scrubbed from the base",
			spec: Spec{Argv: []string{"/usr/bin/env"}, BaseEnv: []string{"BASH_ENV=/x", "ENV=/x", "KEEP=1", "BASH_FUNC_ls%%=() { echo pwned; }", "ZDOTDIR=/x", "SHELLOPTS=xtrace", "PS4=$(id)"}},
			want: outcome{Success: true, Stdout: "KEEP=1\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := testRunner.Run(context.Background(), tt.spec)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if diff := cmp.Diff(tt.want, outcomeOf(res)); diff != "" {
				t.Errorf("testRunner.Run(%+v) (-want +got):\n%s", tt.spec, diff)
			}
			if res.Pid <= 0 {
				t.Errorf("Pid = %d, want the child's pid", res.Pid)
			}
		})
	}
}

func TestRunStartErrors(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-exec")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badFormat := filepath.Join(dir, "bad-format")
	if err := os.WriteFile(badFormat, []byte("no shebang, not a binary\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()

	tests := []struct {
		name     string
		ctx      context.Context
		spec     Spec
		wantCode int
		wantErrs []error
	}{
		{"program not on PATH", nil, Spec{Argv: []string{"exechost-no-such-program"}}, 127, []error{ErrStart, exec.ErrNotFound}},
		{"absolute program missing", nil, Spec{Argv: []string{filepath.Join(dir, "missing")}}, 127, []error{ErrStart, fs.ErrNotExist}},
		{"not executable", nil, Spec{Argv: []string{notExec}}, 126, []error{ErrStart, fs.ErrPermission}},
		{"not a program", nil, Spec{Argv: []string{badFormat}}, 126, []error{ErrStart}},
		{"cwd missing", nil, Spec{Command: "true", Cwd: filepath.Join(dir, "nope")}, -1, []error{ErrStart, fs.ErrNotExist}},
		{"cwd is a file", nil, Spec{Command: "true", Cwd: file}, -1, []error{ErrStart}},
		{"nothing to run", nil, Spec{}, -1, []error{ErrNoCommand}},
		{"empty program name", nil, Spec{Argv: []string{""}}, -1, []error{ErrNoCommand}},
		{"context already done", canceled, Spec{Command: "true"}, -1, []error{context.Canceled}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			res, err := testRunner.Run(ctx, tt.spec)
			if err == nil {
				t.Fatalf("testRunner.Run(%+v) = %+v, nil error; want an error", tt.spec, res)
			}
			for _, want := range tt.wantErrs {
				if !errors.Is(err, want) {
					t.Errorf("Run error %q is not %v", err, want)
				}
			}
			want := outcome{ExitCode: tt.wantCode, Error: err.Error()}
			if diff := cmp.Diff(want, outcomeOf(res)); diff != "" {
				t.Errorf("Run result (-want +got):\n%s", diff)
			}
			if res.Pid != 0 {
				t.Errorf("Pid = %d; want 0, nothing should have started", res.Pid)
			}
		})
	}
}

func TestRunRefusesDangerousEnv(t *testing.T) {
	for _, name := range []string{
		"LD_PRELOAD", "ld_preload", "DYLD_INSERT_LIBRARIES", "BASH_ENV", "ENV", "PATH",
		"BASH_FUNC_ls%%", "ZDOTDIR", "SHELLOPTS", "PS4", "IFS", "NODE_OPTIONS", "GIT_SSH_COMMAND",
		"KSH_ENV", "INPUTRC", "A=B", "",
	} {
		t.Run(name, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "spawned")
			res, err := testRunner.Run(context.Background(), Spec{
				Argv: []string{"touch", marker},
				Env:  map[string]string{"SAFE": "1", name: "/tmp/x"},
			})
			if !errors.Is(err, ErrDangerousEnv) {
				t.Fatalf("Run with env %q: error %v, want ErrDangerousEnv", name, err)
			}
			if !strings.Contains(err.Error(), "hint:") || !strings.Contains(err.Error(), `"`+name+`"`) {
				t.Errorf("error %q should name %q and give a hint", err, name)
			}
			if _, statErr := os.Stat(marker); !errors.Is(statErr, fs.ErrNotExist) {
				t.Errorf("the command ran despite the refused env (marker: %v)", statErr)
			}
			if res.Pid != 0 || res.ExitCode != -1 || res.Error != err.Error() {
				t.Errorf("result %+v; want pid 0, exit -1 and the error", res)
			}
		})
	}
	t.Run("NUL in a value", func(t *testing.T) {
		_, err := testRunner.Run(context.Background(), Spec{Argv: []string{"true"}, Env: map[string]string{"SAFE": "a\x00b"}})
		if !errors.Is(err, ErrDangerousEnv) {
			t.Errorf("error %v, want ErrDangerousEnv", err)
		}
	})
}

// TestRunScrubsInheritedShellStartupEnv plants BASH_ENV and ENV in the
// runner's own environment and checks a shell started by Run reads neither,
// while the same shell started directly does (so the test can fail).
func TestRunScrubsInheritedShellStartupEnv(t *testing.T) {
	bash := testdep.Binary(t, "bash")
	dir := t.TempDir()
	rc := filepath.Join(dir, "rc")
	marker := filepath.Join(dir, "sourced")
	if err := os.WriteFile(rc, []byte("touch "+marker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BASH_ENV", rc)
	t.Setenv("ENV", rc)

	if err := exec.Command(bash, "-c", "true").Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("control: bash did not source BASH_ENV (%v); the test cannot tell a scrub from a no-op", err)
	}
	os.Remove(marker)

	for _, spec := range []Spec{
		{Argv: []string{bash, "-c", "true"}},
		{Argv: []string{bash, "--posix", "-c", "true"}},
		{Command: "true"},
		{Command: "env"},
	} {
		res, err := testRunner.Run(context.Background(), spec)
		if err != nil || !res.Success {
			t.Fatalf("testRunner.Run(%+v) = %+v, %v", spec, res, err)
		}
		if _, err := os.Stat(marker); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("testRunner.Run(%+v) sourced the planted start-up file", spec)
			os.Remove(marker)
		}
		for _, line := range strings.Split(res.Stdout, "\n") {
			if strings.HasPrefix(line, "BASH_ENV=") || strings.HasPrefix(line, "ENV=") {
				t.Errorf("child environment has %q", line)
			}
		}
	}
}

func TestRunCaps(t *testing.T) {
	suffix := "\n" + TruncatedSuffix
	tests := []struct {
		name string
		spec Spec
		want outcome
		tail string
	}{
		{
			name: "exactly the cap",
			spec: Spec{Command: "head -c 200000 /dev/zero | tr '\\0' a"},
			want: outcome{Success: true, Stdout: strings.Repeat("a", MaxOutput)},
			tail: "…" + strings.Repeat("a", TailSize),
		},
		{
			name: "one byte over the cap",
			spec: Spec{Command: "head -c 200001 /dev/zero | tr '\\0' a"},
			want: outcome{Success: true, Stdout: strings.Repeat("a", MaxOutput) + suffix, Truncated: true},
			tail: "…" + strings.Repeat("a", TailSize),
		},
		{
			name: "a 64 MiB flood",
			spec: Spec{Argv: []string{"head", "-c", "67108864", "/dev/zero"}},
			want: outcome{Success: true, Stdout: strings.Repeat("\x00", MaxOutput) + suffix, Truncated: true},
			tail: "…" + strings.Repeat("\x00", TailSize),
		},
		{
			name: "short output has the whole of it as tail",
			spec: Spec{Command: "echo a; echo b"},
			want: outcome{Success: true, Stdout: "a\nb\n"},
			tail: "a\nb\n",
		},
		{
			name: "caps from the spec",
			spec: Spec{Command: "printf 0123456789abcdef", MaxOutput: 10, TailSize: 4},
			want: outcome{Success: true, Stdout: "0123456789" + suffix, Truncated: true},
			tail: "…cdef",
		},
		{
			name: "the tail ends where the output ends",
			spec: Spec{Argv: []string{"seq", "1", "100000"}, MaxOutput: 100},
			want: outcome{Success: true, Stdout: seqText(1, 100000)[:100] + suffix, Truncated: true},
			tail: "…" + seqText(1, 100000)[len(seqText(1, 100000))-TailSize:],
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := testRunner.Run(context.Background(), tt.spec)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if diff := cmp.Diff(tt.want, outcomeOf(res)); diff != "" {
				t.Errorf("Run (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.tail, res.Tail); diff != "" {
				t.Errorf("Tail (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunCapShared checks stdout and stderr share one cap. Which stream
// loses bytes depends on which copier reaches the runner first, so it
// checks the invariants rather than one split.
func TestRunCapShared(t *testing.T) {
	res, err := testRunner.Run(context.Background(), Spec{Command: "head -c 150000 /dev/zero | tr '\\0' o; head -c 60000 /dev/zero | tr '\\0' e >&2"})
	if err != nil || !res.Success || !res.Truncated {
		t.Fatalf("Run = %+v, %v; want success, truncated", outcomeOf(res), err)
	}
	var marked int
	for _, s := range []*string{&res.Stdout, &res.Stderr} {
		if cut, ok := strings.CutSuffix(*s, "\n"+TruncatedSuffix); ok {
			*s = cut
			marked++
		}
	}
	if marked != 1 {
		t.Errorf("%d streams end with the truncation marker; want exactly 1", marked)
	}
	if got := len(res.Stdout) + len(res.Stderr); got != MaxOutput {
		t.Errorf("kept %d bytes; want the cap, %d", got, MaxOutput)
	}
	if strings.Trim(res.Stdout, "o") != "" || strings.Trim(res.Stderr, "e") != "" {
		t.Errorf("stdout and stderr mixed up")
	}
	if len(res.Stdout) > 150000 || len(res.Stderr) > 60000 {
		t.Errorf("kept %d stdout and %d stderr bytes: more than was written", len(res.Stdout), len(res.Stderr))
	}
}

// seqText returns what `seq from to` prints.
func seqText(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.String()
}

func TestRunPTY(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want outcome
	}{
		{
			name: "without a pty nothing is a terminal",
			spec: Spec{Command: "test -t 0 || test -t 1 || test -t 2 || echo notty"},
			want: outcome{Success: true, Stdout: "notty\n"},
		},
		{
			name: "with a pty stdin, stdout and stderr are the terminal",
			spec: Spec{Command: "test -t 0 && test -t 1 && test -t 2 && echo tty", PTY: true},
			want: outcome{Success: true, Stdout: "tty\r\n"},
		},
		{
			name: "stderr arrives as stdout",
			spec: Spec{Command: "echo err >&2; exit 4", PTY: true},
			want: outcome{ExitCode: 4, Stdout: "err\r\n"},
		},
		{
			name: "terminal size",
			spec: Spec{Argv: []string{"stty", "size"}, PTY: true},
			want: outcome{Success: true, Stdout: "24 80\r\n"},
		},
		{
			name: "the pty is the controlling terminal",
			spec: Spec{Command: "exec 9</dev/tty && echo ok", PTY: true},
			want: outcome{Success: true, Stdout: "ok\r\n"},
		},
		{
			name: "caps apply",
			spec: Spec{Argv: []string{"head", "-c", "300000", "/dev/zero"}, PTY: true},
			want: outcome{Success: true, Stdout: strings.Repeat("\x00", MaxOutput) + "\n" + TruncatedSuffix, Truncated: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := testRunner.Run(context.Background(), tt.spec)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if diff := cmp.Diff(tt.want, outcomeOf(res)); diff != "" {
				t.Errorf("testRunner.Run(%+v) (-want +got):\n%s", tt.spec, diff)
			}
		})
	}
}

// TestRunConcurrent runs several commands at once (meaningful under -race)
// and checks each gets its own output.
func TestRunConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Go(func() {
			res, err := testRunner.Run(context.Background(), Spec{Argv: []string{"echo", strconv.Itoa(i)}, PTY: i%2 == 0})
			if err != nil {
				t.Error(err)
			}
			got[i] = strings.TrimRight(res.Stdout, "\r\n")
		})
	}
	testproc.WaitGroup(t, &wg, "the concurrent runs")
	want := make([]string, len(got))
	for i := range want {
		want[i] = strconv.Itoa(i)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
}

// waitFile waits for path to exist with content, for at most a minute (a
// bound against hanging, not a timing assertion).
func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := os.ReadFile(path)
		if err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared: %v", path, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
