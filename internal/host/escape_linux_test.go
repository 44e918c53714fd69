package host

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/jail"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/testdep"
)

// The escape tests run the engine in a helper process (this test binary,
// re-executed with escapeEnv set) under strace -f, so that every process
// the run starts is traced while the engine's own threads, which read
// and write the state directory legitimately, can be told apart.
const (
	escapeEnv        = "EXECHOST_ESCAPE_HELPER" // JSON escapeRun
	escapeTestMarker = `{"version":1,"socket":{"path":"x"},"defaults":{}}`
)

// escapeRun is what the helper runs.
type escapeRun struct {
	State, Work, Home, Text string
	NoConfine               bool
	// Warm runs it in a warm process: an interpreter, or the launcher.
	Warm bool
	// Shielded makes the helper not dumpable, and starts it without
	// CAP_SYS_PTRACE, so that confine.Confinement.InThread lets the
	// runner start a direct command from a restricted thread of its own.
	Shielded bool
	// Afresh sets Engine.ConfineRulesAfresh: the process that applies
	// the confinement builds the base layer itself instead of being
	// handed the engine's.
	Afresh bool
	// NoJail sets Engine.NoJail: the run is confined by Landlock alone
	// (the launcher, a warm process, or in-thread), not in a jail.
	NoJail bool
}

func init() {
	if v := os.Getenv(escapeEnv); v != "" && len(os.Args) > 0 && !strings.HasPrefix(strings.Join(os.Args[1:], " "), "--exechost-") {
		os.Exit(escapeHelper(v))
	}
}

// escapeHelper decides and runs one text with a real engine and prints
// the result; confinement is off only for the controls.
func escapeHelper(spec string) int {
	var r escapeRun
	if err := json.Unmarshal([]byte(spec), &r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	e := NewEngine(r.State, policy.HostNode, "escape")
	e.PATH, e.Home, e.noConfine, e.ConfineRulesAfresh, e.NoJail = "/usr/local/bin:/usr/bin:/bin", r.Home, r.NoConfine, r.Afresh, r.NoJail
	req := Request{RawCommand: r.Text, Cwd: r.Work}
	warmPid := 0
	if r.Warm || testWarmInterpreters() > 0 {
		e.WarmInterpreters = max(1, testWarmInterpreters())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := e.warm().waitReady(ctx, 1)
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		warmPid = e.warm().readyPids()[0]
	}
	if r.Shielded {
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		// What InThread says for a confinement of security=full (network
		// all, no limits), the only kind it can allow.
		ok, why := (&confine.Confinement{Writable: []string{"/"}, Protected: []string{r.State}}).InThread()
		fmt.Printf("inThread=%v %s\n", ok, why)
	}
	runsAs := ""
	if p, err := e.Prepare(req); err == nil {
		runsAs = p.RunsAs()
	}
	res, err := e.Run(context.Background(), req)
	out, _ := json.Marshal(res)
	fmt.Printf("%s\nerr=%v\nrunsAs=%s\nwarm=%v\npid=%d\nlayers=%v\n", out, err, runsAs, warmPid != 0 && res.Pid == warmPid, res.Pid, res.Layers)
	if p := e.warm(); p != nil {
		p.mu.Lock()
		fmt.Printf("pool: handed=%d started=%d lastErr=%v warmPid=%d\n", p.handed, p.started, p.lastErr, warmPid) // for a warm pass that was not handed one
		p.mu.Unlock()
	}
	_ = e.Close()
	if err != nil {
		return 3
	}
	return 0
}

// escapeLayout is one run's tree: the engine's state directory (the
// approvals file allowlisting only the case's programs, a node key), the
// run's cwd, and a home directory whose .bashrc nothing may append to.
type escapeLayout struct {
	root, state, work, home, approvals, key, bashrc string
	before                                          []byte
}

func newEscapeLayout(t *testing.T, sec policy.Security, allow []string, files map[string]string) escapeLayout {
	t.Helper()
	root := t.TempDir()
	l := escapeLayout{root: root, state: filepath.Join(root, "state"), work: filepath.Join(root, "work"), home: filepath.Join(root, "home")}
	for _, d := range []string{l.work, l.home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	store := approvals.NewStore(l.state)
	if _, err := store.Update(func(f *approvals.File) error {
		f.Defaults.Security, f.Defaults.Ask, f.Defaults.AskFallback = string(sec), string(policy.AskOff), string(policy.FallbackDeny)
		for _, p := range allow {
			f.AddPattern("*", p)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	l.approvals, l.key, l.bashrc = store.Path, filepath.Join(l.state, "node.key"), filepath.Join(l.home, ".bashrc")
	for p, body := range map[string]string{l.key: "SECRET-KEY\n", l.bashrc: "# rc\n"} {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range files {
		body = strings.NewReplacer("$STATE", l.state, "$HOME", l.home).Replace(body)
		if err := os.WriteFile(filepath.Join(l.work, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if l.before, err = os.ReadFile(l.approvals); err != nil {
		t.Fatal(err)
	}
	return l
}

// evilScript is what an allowed program is made to start: it widens the
// policy, reads the key into the workspace, appends to ~/.bashrc, and
// writes in its cwd (which must keep working).
const evilScript = `#!/bin/sh
echo '{"version":1,"pwned":true,"defaults":{"security":"full"}}' > $STATE/exec-approvals.json
cat $STATE/node.key > ./leak
echo pwned >> $HOME/.bashrc
echo ok > ./inwork
`

// TestConfinedEscapes runs the argument-semantics escapes of issue 26,
// each allowed by an allowlist holding only its program, under strace on
// the real kernel: confined, they write nothing outside the cwd and the
// run's temporary directory, open nothing in the state directory and
// connect nowhere, while writes in the cwd still work; unconfined (the
// control), the same run must have its effect, so the confined run cannot
// pass by the command failing.
func TestConfinedEscapes(t *testing.T) {
	straceBin := testdep.Binary(t, "strace")
	testdep.Binary(t, "bash")
	if abi := confine.KernelABI(); abi < 4 {
		testdep.Missing(t, "landlock", fmt.Sprintf("confinement with network none needs Landlock ABI 4; this kernel offers %d", abi))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	files := map[string]string{
		"evil.sh": evilScript, "trigger": "", "input": "b\na\n", "args": ". -name trigger -exec /bin/sh ./evil.sh ;\n",
		"net.sh": "#!/bin/bash\nexec 3<>/dev/tcp/127.0.0.1/" + port + " && echo connected > ./net\necho ok > ./inwork\n",
	}
	awk := []string{"/usr/bin/awk", "/usr/bin/mawk", "/usr/bin/gawk", "/usr/bin/original-awk"}
	cases := []struct {
		name, text string
		allow      []string
		// effect reports whether the escape happened (the control must
		// see it); inwork whether the run's write in its cwd must exist.
		effect func(l escapeLayout) bool
		inwork bool
		// full runs under security=full, where only the protected set
		// is out of reach: writes elsewhere are allowed.
		full bool
	}{
		{"find -exec", `find . -name trigger -exec /bin/sh ./evil.sh \;`, []string{"/usr/bin/find"}, widened, true, false},
		// The same in the interpreter, which confines its own process.
		{"find -exec, interpreted", `true && find . -name trigger -exec /bin/sh ./evil.sh \;`, []string{"/usr/bin/find"}, widened, true, false},
		// security=full: any text runs as /bin/sh -c through the
		// launcher; only the state directory is out of reach.
		{"full, shell text", `/bin/sh ./evil.sh`, nil, policyChanged, true, true},
		{"sort -o", `sort -o ` + "$HOME" + `/.bashrc ./input`, []string{"/usr/bin/sort"}, bashrcChanged, false, false},
		{"sort -o policy", `sort -o ` + "$STATE" + `/exec-approvals.json ./input`, []string{"/usr/bin/sort"}, policyChanged, false, false},
		{"awk system", `awk 'BEGIN{system("/bin/sh ./evil.sh")}'`, awk, widened, true, false},
		// xargs appends run-time arguments to an allowed program.
		{"xargs", `xargs -a ./args find`, []string{"/usr/bin/xargs", "/usr/bin/find"}, widened, true, false},
		{"tcp connect", `find . -name trigger -exec /bin/bash ./net.sh \;`, []string{"/usr/bin/find"}, func(l escapeLayout) bool {
			b, _ := os.ReadFile(filepath.Join(l.work, "net"))
			return strings.Contains(string(b), "connected")
		}, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Confined in a standing jail (the engine's default for
			// a direct start and shell text), then confined by
			// Landlock alone (NoJail) in a warm process (an interpreted
			// run's interpreter, or the launcher of one that starts
			// directly) handed the engine's kept base layer, then the
			// same with the base layer built by that process
			// (ConfineRulesAfresh), then confined in-thread
			// (security=full: the only runs
			// confine.Confinement.InThread may start so, in a shielded
			// host), then the control without confinement.
			ruleAdds := map[bool]int{} // by afresh: the warm process's landlock_add_rule calls
			for _, mode := range []struct{ confined, warm, shielded, afresh bool }{{true, false, false, false}, {true, true, false, false}, {true, true, false, true}, {true, false, true, false}, {false, false, false, false}} {
				jailed := mode.confined && !mode.warm && !mode.shielded
				confined := mode.confined
				if mode.shielded && !tc.full {
					continue // network none: always through the launcher
				}
				sec := policy.SecurityAllowlist
				if tc.full {
					sec = policy.SecurityFull
				}
				l := newEscapeLayout(t, sec, tc.allow, files)
				text := strings.NewReplacer("$STATE", l.state, "$HOME", l.home).Replace(tc.text)
				trace := filepath.Join(l.root, "trace")
				out := runEscape(t, straceBin, trace, escapeRun{State: l.state, Work: l.work, Home: l.home, Text: text, NoConfine: !confined, Warm: mode.warm, Shielded: mode.shielded, Afresh: mode.afresh, NoJail: !jailed})
				// security=full without a confine member writes anywhere
				// and is confined by Landlock alone.
				if jailed && !tc.full && !jailedOut.MatchString(out) {
					t.Fatalf("the run did not start in a jail; the jail pass proves nothing:\n%s", out)
				}
				if mode.shielded && !strings.Contains(out, "inThread=true") {
					t.Fatalf("the shielded helper does not start in-thread; the pass proves nothing:\n%s", out)
				}
				if !strings.Contains(out, `"Decision":{"decision":"allow"`) {
					t.Fatalf("confined=%v: the run was not allowed; the test proves nothing:\n%s", confined, out)
				}
				if mode.warm && !strings.Contains(out, "\nwarm=true\n") {
					t.Fatalf("the run was not handed to a warm process; the warm pass proves nothing:\n%s", out)
				}
				if mode.warm {
					ruleAdds[mode.afresh] = countRuleAdds(t, trace, out)
				}
				happened := tc.effect(l)
				if !confined {
					if !happened {
						t.Fatalf("control (no confinement): the escape had no effect, so the confined run proves nothing:\n%s", out)
					}
					// The trace check must see the unconfined escape too,
					// or its silence on the confined run means nothing.
					if len(checkTrace(t, trace, l, tc.full)) == 0 {
						t.Errorf("control (no confinement): the strace check saw nothing of the escape")
					}
					continue
				}
				if happened {
					t.Errorf("confined: the escape happened:\n%s", out)
				}
				if b, _ := os.ReadFile(l.key); string(b) != "SECRET-KEY\n" {
					t.Errorf("confined: the node key changed")
				}
				if b, _ := os.ReadFile(filepath.Join(l.work, "leak")); len(b) > 0 {
					t.Errorf("confined: the key leaked into the workspace: %q", b)
				}
				if _, err := os.Stat(filepath.Join(l.work, "inwork")); tc.inwork && err != nil {
					t.Errorf("confined: a write in the cwd failed: %v\n%s", err, out)
				}
				if tc.full && !bashrcChanged(l) {
					t.Errorf("confined under security=full: a write outside the cwd was refused")
				}
				for _, v := range checkTrace(t, trace, l, tc.full) {
					t.Errorf("confined, strace: %s", v)
				}
			}
			// Handed the base layer, the warm process adds only its own
			// layer's rules; building it, the rules around the state
			// directory too.
			t.Logf("landlock_add_rule calls in the warm process: %d handed the base layer, %d building it", ruleAdds[false], ruleAdds[true])
			if ruleAdds[false] == 0 || ruleAdds[false] >= ruleAdds[true] {
				t.Errorf("landlock_add_rule calls in the warm process: %d handed the base layer, %d building it; want fewer (and some) when handed", ruleAdds[false], ruleAdds[true])
			}
		})
	}
	if c, ok := acceptQueued(ln); ok {
		c.Close() // the control's connection: expected, counted by its effect
	}
}

func widened(l escapeLayout) bool { return policyChanged(l) && bashrcChanged(l) }

// policyChanged reports whether the policy file was replaced: it no
// longer parses, or its security, socket token or unknown members differ
// (the escape's own file has a member the original lacks). The engine's
// own lastUsedAt stamps, written after a run, asynchronously, do not count.
func policyChanged(l escapeLayout) bool {
	before, err := approvals.Parse(l.approvals, l.before)
	if err != nil {
		panic(err)
	}
	b, err := os.ReadFile(l.approvals)
	if err != nil {
		return true
	}
	after, err := approvals.Parse(l.approvals, b)
	return err != nil || after.Defaults.Security != before.Defaults.Security || after.Socket.Token != before.Socket.Token || len(after.Extra) != len(before.Extra)
}

func bashrcChanged(l escapeLayout) bool {
	b, _ := os.ReadFile(l.bashrc)
	return string(b) != "# rc\n"
}

// acceptQueued takes a connection already queued on ln, if any.
func acceptQueued(ln net.Listener) (net.Conn, bool) {
	_ = ln.(*net.TCPListener).SetDeadline(time.Now())
	c, err := ln.Accept()
	return c, err == nil
}

// runEscape runs the helper under strace and returns its output.
func runEscape(t *testing.T, straceBin, trace string, r escapeRun) string {
	t.Helper()
	spec, _ := json.Marshal(r)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Pids as strace's namespace sees them: a jailed run's clone returns
	// its pid in the jail's namespace.
	cmd := exec.CommandContext(ctx, straceBin, "-f", "-qq", "-y", "--decode-pids=pidns", "-s", "256", "-o", trace,
		"-e", "trace=execve,open,openat,openat2,creat,truncate,rename,renameat,renameat2,unlink,unlinkat,mkdir,mkdirat,link,linkat,symlink,symlinkat,connect,clone,clone3,fork,vfork,landlock_add_rule",
		"--", os.Args[0])
	if r.Shielded && os.Geteuid() == 0 {
		// Root's CAP_SYS_PTRACE would keep InThread from allowing it.
		setpriv := testdep.Binary(t, "setpriv")
		cmd.Args = append(cmd.Args[:len(cmd.Args)-1], setpriv, "--bounding-set=-sys_ptrace", "--inh-caps=-sys_ptrace", "--", os.Args[0])
	}
	cmd.Env = append(os.Environ(), escapeEnv+"="+string(spec))
	// On the deadline the whole group goes (strace and the helper: the
	// jail servers and their runs die with the helper), and the output
	// is taken as it is even if something still holds the pipe.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the traced run did not end within 2 minutes:\n%s", out)
	}
	_ = err // the helper's status is in its output
	return string(out)
}

var (
	traceLine = regexp.MustCompile(`^(\d+) +(.*)$`)
	traceCall = regexp.MustCompile(`^(\w+)\((.*)\) += (-?\d+)(<[^>]*>)?(.*)$`)
	quoted    = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
	dirfdPath = regexp.MustCompile(`^(\d+)<([^>]*)>`)
	hostPid   = regexp.MustCompile(`/\* (\d+) in strace's PID NS \*/`)
	// jailedOut is the helper's line for a run a jail held with its view.
	jailedOut  = regexp.MustCompile(`\nlayers=\[[^\]]*\bview\b`)
	writeFlags = regexp.MustCompile(`O_WRONLY|O_RDWR|O_CREAT|O_TRUNC`)
)

// tracedCall is one system call of an strace -f -y log.
type tracedCall struct {
	tid                      int
	name, args, ret, retPath string
}

// readTrace reads an strace -f -y log: its calls, the process each thread
// belongs to, and the first (the helper's own) process.
func readTrace(t *testing.T, trace string) (calls []tracedCall, proc map[int]int, root int) {
	t.Helper()
	f, err := os.Open(trace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pending := map[int]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := traceLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		tid, _ := strconv.Atoi(m[1])
		rest := m[2]
		if i := strings.Index(rest, " <unfinished ...>"); i >= 0 {
			pending[tid] = rest[:i]
			continue
		}
		if strings.HasPrefix(rest, "<... ") {
			_, after, _ := strings.Cut(rest, " resumed>")
			rest = pending[tid] + after
			delete(pending, tid)
		}
		c := traceCall.FindStringSubmatch(rest)
		if c == nil {
			continue
		}
		ret := c[3]
		if n := hostPid.FindStringSubmatch(c[5]); n != nil {
			ret = n[1]
		}
		calls = append(calls, tracedCall{tid, c[1], c[2], ret, strings.Trim(c[4], "<>")})
	}
	if len(calls) == 0 {
		t.Fatal("empty trace")
	}
	// Which process each thread belongs to: a clone with CLONE_THREAD
	// joins its parent's process; any other clone, fork or vfork starts one.
	proc = map[int]int{}
	root = calls[0].tid
	proc[root] = root
	for changed := true; changed; {
		changed = false
		for _, c := range calls {
			if c.name != "clone" && c.name != "clone3" && c.name != "fork" && c.name != "vfork" {
				continue
			}
			child, _ := strconv.Atoi(c.ret)
			parent, ok := proc[c.tid]
			if child <= 0 || !ok {
				continue
			}
			want := child
			if strings.Contains(c.args, "CLONE_THREAD") {
				want = parent
			}
			if proc[child] != want {
				proc[child], changed = want, true
			}
		}
	}
	return calls, proc, root
}

// countRuleAdds counts the landlock_add_rule calls of the run's first
// process (the helper's "pid=" line) in the trace.
func countRuleAdds(t *testing.T, trace, out string) int {
	t.Helper()
	var pid int
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "pid="); ok {
			pid, _ = strconv.Atoi(v)
		}
	}
	calls, proc, _ := readTrace(t, trace)
	n := 0
	for _, c := range calls {
		if c.name == "landlock_add_rule" && proc[c.tid] == pid && c.ret != "-1" {
			n++
		}
	}
	return n
}

// checkTrace reads an strace -f -y log and returns what the processes of
// the run (every process but the helper's own) did that confinement
// forbids: a successful open of anything in the state directory, a
// successful write-open or change of a path outside the cwd, the run's
// temporary directory and the terminal devices (unless writeAnywhere),
// and any TCP connect.
func checkTrace(t *testing.T, trace string, l escapeLayout, writeAnywhere bool) []string {
	t.Helper()
	calls, proc, root := readTrace(t, trace)
	tmp := os.TempDir()
	writable := func(p string) bool {
		return writeAnywhere && !within(p, l.state) || within(p, l.work) || (strings.HasPrefix(p, filepath.Join(tmp, "exechost-run-"))) ||
			strings.HasPrefix(p, "/dev/") || strings.HasPrefix(p, "pipe:") || strings.HasPrefix(p, "socket:") || strings.HasPrefix(p, "anon_inode:")
	}
	// The jail servers the engine started build their jails (mounts,
	// their cgroup) before they serve: that is the engine's work, not
	// the run's; the runs they fork are checked.
	servers := map[int]bool{}
	for _, c := range calls {
		if c.name == "execve" && c.ret == "0" && strings.Contains(c.args, jail.Arg) {
			servers[proc[c.tid]] = true
		}
	}
	// What a jail's server started sees the jail's view, where /tmp is a
	// private tmpfs: of the host's /tmp only the test's tree (the cwd, a
	// writable root) and this binary are bound in, so a write elsewhere
	// beneath /tmp stays in the jail.
	jailed := descendants(calls, proc, servers)
	inJail := func(tid int, p string) bool {
		return jailed[proc[tid]] && strings.HasPrefix(p, "/tmp/") && !within(p, l.root) && p != os.Args[0]
	}
	var bad []string
	for _, c := range calls {
		if p, ok := proc[c.tid]; ok && (p == root || servers[p]) {
			continue // the engine itself
		}
		ok := c.ret != "-1" || strings.Contains(c.retPath+c.args, "EINPROGRESS")
		switch c.name {
		case "connect":
			if ok && (strings.Contains(c.args, "AF_INET")) {
				bad = append(bad, fmt.Sprintf("pid %d connected: connect(%s)", c.tid, c.args))
			}
		case "open", "openat", "openat2", "creat":
			if c.ret == "-1" {
				continue
			}
			if within(c.retPath, l.state) {
				bad = append(bad, fmt.Sprintf("pid %d opened %s in the protected set", c.tid, c.retPath))
			}
			if (c.name == "creat" || writeFlags.MatchString(c.args)) && !writable(c.retPath) && !inJail(c.tid, c.retPath) {
				bad = append(bad, fmt.Sprintf("pid %d opened %s for writing: %s(%s)", c.tid, c.retPath, c.name, c.args))
			}
		case "clone", "clone3", "fork", "vfork", "execve":
		default: // calls that change the file system
			if c.ret != "0" {
				continue
			}
			base := l.work
			if m := dirfdPath.FindStringSubmatch(c.args); m != nil {
				base = m[2]
			}
			for _, q := range quoted.FindAllStringSubmatch(c.args, -1) {
				p := q[1]
				if !filepath.IsAbs(p) {
					p = filepath.Join(base, p)
				}
				if !writable(p) && !inJail(c.tid, p) || within(p, l.state) {
					bad = append(bad, fmt.Sprintf("pid %d changed %s: %s(%s)", c.tid, p, c.name, c.args))
				}
			}
		}
	}
	return bad
}

// descendants are the processes started, directly or not, by the
// processes of roots (by clone, fork or vfork without CLONE_THREAD).
func descendants(calls []tracedCall, proc map[int]int, roots map[int]bool) map[int]bool {
	out := map[int]bool{}
	for r := range roots {
		out[r] = true
	}
	for changed := true; changed; {
		changed = false
		for _, c := range calls {
			if c.name != "clone" && c.name != "clone3" && c.name != "fork" && c.name != "vfork" || strings.Contains(c.args, "CLONE_THREAD") {
				continue
			}
			child, _ := strconv.Atoi(c.ret)
			if child > 0 && out[proc[c.tid]] && !out[child] {
				out[child], changed = true, true
			}
		}
	}
	return out
}

// within reports whether p is root or beneath it.
func within(p, root string) bool {
	return p == root || strings.HasPrefix(p, root+"/")
}
