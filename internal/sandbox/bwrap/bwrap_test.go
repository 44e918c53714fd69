//go:build linux

package bwrap

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/testdep"
)

func open(t testing.TB, mutate func(*sandbox.Config)) (*Backend, string) {
	t.Helper()
	testdep.Bwrap(t, true)
	stateDir := t.TempDir()
	cfg := sandbox.DefaultConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	b, err := Open(context.Background(), cfg, stateDir)
	if err != nil {
		t.Fatalf("Open: %v (a bare bwrap works here)", err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	return b, stateDir
}

func run(t testing.TB, b *Backend, req sandbox.Request) runner.Result {
	t.Helper()
	if req.AgentID == "" {
		req.AgentID = "main"
	}
	res, err := b.Exec(context.Background(), req)
	if err != nil {
		t.Fatalf("Exec(%q %q): %v", req.Argv, req.Command, err)
	}
	return res
}

// marked returns an environment carrying a unique marker, and a function
// that waits until no host process carries it any more, failing the test if
// some still do after a generous deadline.
func marked(t *testing.T) (map[string]string, func()) {
	var b [8]byte
	rand.Read(b[:])
	mark := "EXECHOST_TEST_MARK=" + hex.EncodeToString(b[:])
	k, v, _ := strings.Cut(mark, "=")
	return map[string]string{k: v}, func() {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			left := withEnv(mark)
			if len(left) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("sandbox processes left on the host: %v", left)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// withEnv lists host processes whose environment holds kv.
func withEnv(kv string) []string {
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	var out []string
	for _, p := range procs {
		env, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if bytes.Contains(env, []byte(kv+"\x00")) {
			out = append(out, filepath.Base(filepath.Dir(p)))
		}
	}
	return out
}

func TestExec(t *testing.T) {
	b, _ := open(t, nil)
	tests := []struct {
		name string
		req  sandbox.Request
		want runner.Result
	}{
		{"argv", sandbox.Request{Argv: []string{"echo", "hello", "$HOME;"}},
			runner.Result{Success: true, Stdout: "hello $HOME;\n"}},
		{"shell text, stderr, exit code", sandbox.Request{Command: "echo out; echo err >&2; exit 3"},
			runner.Result{ExitCode: 3, Stdout: "out\n", Stderr: "err\n"}},
		{"env overlay and base", sandbox.Request{Command: `echo "$GREETING $HOME $TMPDIR"`, Env: map[string]string{"GREETING": "hi"}},
			runner.Result{Success: true, Stdout: "hi /workspace /tmp\n"}},
		{"host environment does not leak", sandbox.Request{Command: `echo "[$GOPATH$USER$SSH_AUTH_SOCK]"`},
			runner.Result{Success: true, Stdout: "[]\n"}},
		{"default cwd is the workspace", sandbox.Request{Argv: []string{"pwd"}},
			runner.Result{Success: true, Stdout: "/workspace\n"}},
		{"relative cwd", sandbox.Request{Command: "mkdir -p sub && cd sub && pwd"},
			runner.Result{Success: true, Stdout: "/workspace/sub\n"}},
		{"missing program", sandbox.Request{Argv: []string{"no-such-program"}},
			runner.Result{ExitCode: 127, Stderr: "no-such-program: not found\n"}},
		{"unprivileged, no capabilities, no new privileges", sandbox.Request{Command: "id -u; grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status"},
			runner.Result{Success: true, Stdout: "65534\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\n"}},
		{"own pid namespace", sandbox.Request{Command: "n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; [ $n -le 4 ] && echo few"},
			runner.Result{Success: true, Stdout: "few\n"}}, // bwrap's init, the agent, sh (and the second bwrap of a root gateway)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, b, tt.req)
			got.Tail, got.Duration = "", 0
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWritesOutsideWorkspaceFail(t *testing.T) {
	b, stateDir := open(t, nil)
	tests := []struct {
		path string
		ok   bool
	}{
		{"/etc/written", false},
		{"/usr/written", false},
		{"/written", false},
		{"/proc/written", false},
		{"/workspace/written", true},
		{"/tmp/written", true},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			res := run(t, b, sandbox.Request{Command: "echo x > " + tt.path})
			if res.Success != tt.ok {
				t.Errorf("write %s: success = %v, want %v (stderr %q)", tt.path, res.Success, tt.ok, res.Stderr)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(stateDir, "sandboxes", "main", "written")); err != nil {
		t.Errorf("workspace write not visible on the host: %v", err)
	}
	if _, err := os.Stat("/tmp/written"); err == nil {
		t.Errorf("sandbox /tmp write reached the host's /tmp")
	}
}

func TestHostIsHidden(t *testing.T) {
	b, stateDir := open(t, nil)
	for _, p := range []string{stateDir, "/root", "/home", "/run", "/var/run/docker.sock"} {
		t.Run(p, func(t *testing.T) {
			if res := run(t, b, sandbox.Request{Argv: []string{"ls", p}}); res.Success {
				t.Errorf("%s is visible in the sandbox: %q", p, res.Stdout)
			}
		})
	}
}

func TestNetworkAbsent(t *testing.T) {
	b, _ := open(t, nil)
	res := run(t, b, sandbox.Request{Argv: []string{"cat", "/proc/net/dev"}})
	var ifaces []string
	for _, line := range strings.Split(res.Stdout, "\n")[2:] {
		if name, _, ok := strings.Cut(line, ":"); ok {
			ifaces = append(ifaces, strings.TrimSpace(name))
		}
	}
	if diff := cmp.Diff([]string{"lo"}, ifaces); diff != "" {
		t.Errorf("interfaces (-want +got):\n%s", diff)
	}
}

// hostProcsOf counts the host's processes running as uid.
func hostProcsOf(uid int) int {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	n := 0
	for _, p := range procs {
		if fi, err := os.Stat(p); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid {
				n++
			}
		}
	}
	return n
}

func TestPidsLimit(t *testing.T) {
	const sandboxLimit = 32
	limit := sandboxLimit
	b, _ := open(t, func(c *sandbox.Config) { *c = With(*c, func(x *Config) { x.PidsLimit = int64(limit) }) })
	shared := os.Geteuid() == 0 && !b.nested
	if shared {
		// A root gateway without user namespaces: the limit is that of
		// host uid 65534, shared with its other processes (docker
		// sandboxes of parallel tests, say); leave them their share.
		limit += hostProcsOf(sandboxUID)
		b, _ = open(t, func(c *sandbox.Config) { *c = With(*c, func(x *Config) { x.PidsLimit = int64(limit) }) })
	}
	// What the sandbox sees beyond its limited processes: bwrap's init
	// (pid 1), and for a root gateway the second bwrap and its monitor,
	// which live outside the limited user namespace.
	maxN := limit + 1
	if b.nested {
		maxN = limit + 3
	}
	t.Run("background processes are capped", func(t *testing.T) {
		// The subshell dies at the first failed fork; counting /proc then
		// needs no fork (globs, arithmetic and echo are shell builtins).
		res := run(t, b, sandbox.Request{Command: "( i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); done ) 2>/dev/null; n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo $n", Timeout: 60 * time.Second})
		var n int
		if _, err := fmt.Sscan(res.Stdout, &n); err != nil {
			t.Fatalf("count: %v in %+v", err, res)
		}
		if n > maxN || (!shared && n < sandboxLimit/2) {
			t.Errorf("processes in the sandbox = %d, want at most %d (and the loop to get near it)", n, maxN)
		}
	})
	t.Run("fork bomb is contained and leaves nothing", func(t *testing.T) {
		env, gone := marked(t)
		// The main shell counts with builtins only (it could not fork
		// any more), repeatedly, while the bomb saturates the limit.
		res := run(t, b, sandbox.Request{Command: "b() { b | b & }; b; for r in 1 2 3 4 5 6 7 8 9 10; do n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo $n; done", Env: env, Timeout: 30 * time.Second})
		if res.TimedOut {
			t.Errorf("fork bomb ran into the timeout: exit %d", res.ExitCode)
		}
		// The kernel checks RLIMIT_NPROC and counts the new process in two
		// steps, so forkers racing on every CPU can each pass the check
		// before any is counted: a bomb overshoots by up to about that
		// many. Containment is what matters (without the limit it reaches
		// hundreds); the sequential test above holds the exact bound.
		bombMax := maxN + 2*runtime.NumCPU()
		for _, f := range strings.Fields(res.Stdout) {
			var n int
			fmt.Sscan(f, &n)
			if n > bombMax {
				t.Errorf("fork bomb reached %d processes, limit %d (+%d for racing forks)", n, limit, bombMax-maxN)
			}
		}
		gone()
		if res := run(t, b, sandbox.Request{Argv: []string{"echo", "fine"}}); res.Stdout != "fine\n" {
			t.Errorf("sandbox after the fork bomb: %+v", res)
		}
	})
}

func TestTimeoutLeavesNoProcess(t *testing.T) {
	b, _ := open(t, nil)
	env, gone := marked(t)
	res := run(t, b, sandbox.Request{Command: "sleep 1000 & setsid sleep 1000 & (trap '' TERM HUP; sleep 1000) & echo started; wait", Env: env, Timeout: time.Second})
	if !res.TimedOut || res.Success || res.Stdout != "started\n" {
		t.Errorf("result = %+v, want a timeout after the output", res)
	}
	gone()
}

func TestOutputCap(t *testing.T) {
	b, _ := open(t, nil)
	res := run(t, b, sandbox.Request{Command: "head -c 1048576 /dev/zero | tr '\\0' x"})
	if !res.Truncated || !strings.HasSuffix(res.Stdout, runner.TruncatedSuffix) {
		t.Errorf("1 MB flood: Truncated=%v, stdout ends …%q", res.Truncated, res.Stdout[max(0, len(res.Stdout)-30):])
	}
	if len(res.Stdout) > runner.MaxOutput+len(runner.TruncatedSuffix)+1 {
		t.Errorf("kept %d bytes, cap is %d", len(res.Stdout), runner.MaxOutput)
	}
}

func TestLandlock(t *testing.T) {
	b, _ := open(t, nil)
	rep := b.Report()
	if confine.KernelABI() == 0 {
		if !strings.HasPrefix(rep.Landlock, "unavailable") {
			t.Errorf("report without kernel landlock: %q", rep.Landlock)
		}
		return
	}
	if !strings.HasPrefix(rep.Landlock, "enforced") {
		t.Fatalf("landlock not enforced on a kernel with ABI %d: %q", confine.KernelABI(), rep.Landlock)
	}
	req, _ := open(t, func(c *sandbox.Config) { *c = With(*c, func(x *Config) { x.Landlock = LandlockRequire }) })
	if res := run(t, req, sandbox.Request{Argv: []string{"true"}}); !res.Success {
		t.Errorf("landlock=require on a kernel with ABI %d: %+v", rep.LandlockABI, res)
	}
	if rep.LandlockABI >= 6 {
		// The sandbox's pid 1 (bwrap's init) is outside the Landlock
		// domain, so the scoped signal restriction forbids signalling it,
		// although it runs as the same user.
		if res := run(t, b, sandbox.Request{Command: "kill -0 1"}); res.Success {
			t.Errorf("signal to a process outside the Landlock domain succeeded")
		}
	}
	if os.Geteuid() == 0 {
		// pid 1 is then root's and unsignallable anyway; the baseline
		// below would prove nothing.
		return
	}
	off, _ := open(t, func(c *sandbox.Config) { *c = With(*c, func(x *Config) { x.Landlock = LandlockOff }) })
	if rep.LandlockABI >= 6 {
		if res := run(t, off, sandbox.Request{Command: "kill -0 1"}); !res.Success {
			t.Errorf("with landlock off, kill -0 1 failed: %+v (the test above proves nothing)", res)
		}
	}
}

func TestSetupFailuresAreErrors(t *testing.T) {
	b, _ := open(t, nil)
	_, err := b.Exec(context.Background(), sandbox.Request{AgentID: "main", Argv: []string{"true"}, Cwd: "/no/such/dir"})
	if !errors.Is(err, ErrSetup) {
		t.Errorf("Exec in a missing cwd: %v, want ErrSetup", err)
	}
	_, err = b.Exec(context.Background(), sandbox.Request{AgentID: "../escape", Argv: []string{"true"}})
	if !errors.Is(err, sandbox.ErrBadAgentID) {
		t.Errorf("Exec for agent ../escape: %v, want ErrBadAgentID", err)
	}
	cfg := sandbox.DefaultConfig()
	cfg = With(cfg, func(x *Config) { x.Path = "/bin/false" })
	if _, err := Open(context.Background(), cfg, t.TempDir()); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Open with a broken bwrap: %v, want ErrUnavailable", err)
	}
	cfg = With(cfg, func(x *Config) { x.Path = filepath.Join(t.TempDir(), "no-bwrap") })
	if _, err := Open(context.Background(), cfg, t.TempDir()); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "hint:") {
		t.Errorf("Open without bwrap: %v, want ErrUnavailable with a hint", err)
	}
	b.Close(context.Background())
	if _, err := b.Exec(context.Background(), sandbox.Request{AgentID: "main", Argv: []string{"true"}}); !errors.Is(err, ErrClosed) {
		t.Errorf("Exec after Close: %v, want ErrClosed", err)
	}
}

// BenchmarkBwrapTrue runs `true` through the backend: bwrap, the helper
// re-exec (limits, no_new_privs, Landlock) and the command.
func BenchmarkBwrapTrue(b *testing.B) {
	be, _ := open(b, nil)
	req := sandbox.Request{AgentID: "main", Argv: []string{"true"}}
	for b.Loop() {
		if _, err := be.Exec(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBwrapBare is the baseline: a bare `bwrap --ro-bind / / true`.
func BenchmarkBwrapBare(b *testing.B) {
	bw := testdep.Binary(b, "bwrap")
	for b.Loop() {
		if out, err := exec.Command(bw, "--ro-bind", "/", "/", "true").CombinedOutput(); err != nil {
			b.Fatalf("bwrap: %v %s", err, out)
		}
	}
}

// TestRootWithoutUserNamespace covers the fallback of a root gateway on a
// kernel without unprivileged user namespaces: one bwrap, the helper drops
// to host uid 65534.
func TestRootWithoutUserNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the fallback exists only for a root gateway")
	}
	b, _ := open(t, nil)
	b.nested = false
	rep, err := b.probe(context.Background())
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	b.report = rep
	if !slices.ContainsFunc(b.Isolation(), func(s string) bool { return strings.Contains(s, "no user namespace") }) {
		t.Errorf("isolation does not say there is no user namespace: %q", b.Isolation())
	}
	tests := []struct {
		cmd, want string
	}{
		{"id -u; grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status", "65534\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\n"},
		{"cat /proc/self/uid_map", "         0          0 4294967295\n"},
		{"echo x > /etc/written || echo denied", "denied\n"},
		{"cat /etc/shadow >/dev/null 2>&1 || echo denied", "denied\n"},
		{"echo x > /workspace/w && cat /workspace/w", "x\n"},
	}
	for _, tt := range tests {
		if res := run(t, b, sandbox.Request{Command: tt.cmd}); res.Stdout != tt.want {
			t.Errorf("%s: got %+v, want stdout %q", tt.cmd, res, tt.want)
		}
	}
}

func TestUserNamespace(t *testing.T) {
	b, stateDir := open(t, nil)
	if os.Geteuid() == 0 && !b.nested {
		t.Skip("root gateway on a kernel without unprivileged user namespaces (covered by TestRootWithoutUserNamespace)")
	}
	res := run(t, b, sandbox.Request{Command: "cat /proc/self/uid_map; touch /workspace/owned"})
	f := strings.Fields(res.Stdout)
	if len(f) != 3 || f[0] != "65534" || f[2] != "1" {
		t.Errorf("uid_map = %q, want a one-user map of 65534 (a fresh user namespace)", res.Stdout)
	}
	// Who the sandbox is to the host kernel: the gateway's user, or
	// 65534 for a root gateway.
	fi, err := os.Stat(filepath.Join(stateDir, "sandboxes", "main", "owned"))
	if err != nil {
		t.Fatal(err)
	}
	want := os.Geteuid()
	if want == 0 {
		want = sandboxUID
	}
	if got := int(fi.Sys().(*syscall.Stat_t).Uid); got != want {
		t.Errorf("sandbox files are owned by host uid %d, want %d", got, want)
	}
}
