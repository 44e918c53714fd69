package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/state"
)

// fixture is a state directory with an approvals file, a bin directory of
// tiny scripts used as the host PATH, and an engine over both.
type fixture struct {
	t      testing.TB
	dir    string
	bin    string
	store  *approvals.Store
	engine *Engine
	mu     sync.Mutex
	events []bridge.ExecEvent
	audits []AuditRecord
}

func newFixture(t testing.TB, sec policy.Security, ask policy.Ask, fb policy.Fallback, allow ...string) *fixture {
	t.Helper()
	// The work directory (the runs' cwd), the programs and the state
	// directory are siblings: runs are confined away from the state
	// directory (internal/confine), and cannot create entries directly
	// in a directory that contains it.
	root := t.TempDir()
	dir, bin := filepath.Join(root, "work"), filepath.Join(root, "bin")
	for _, d := range []string{dir, bin} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"hello", "other", "marker"} {
		script := "#!/bin/sh\necho " + name + " \"$@\"\n"
		if name == "marker" {
			script = "#!/bin/sh\ntouch \"$1\"\n"
		}
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stateDir := filepath.Join(root, "state")
	f := &fixture{t: t, dir: dir, bin: bin, store: approvals.NewStore(stateDir)}
	_, err := f.store.Update(func(file *approvals.File) error {
		file.Defaults.Security, file.Defaults.Ask, file.Defaults.AskFallback = string(sec), string(ask), string(fb)
		for _, p := range allow {
			file.AddPattern("*", strings.ReplaceAll(p, "$BIN", bin))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(stateDir, policy.HostGateway, "gw")
	e.PATH = bin + ":/usr/bin:/bin"
	e.Home = dir
	e.OnEvent = func(ev bridge.ExecEvent) { f.mu.Lock(); f.events = append(f.events, ev); f.mu.Unlock() }
	e.OnAudit = func(r AuditRecord) { f.mu.Lock(); f.audits = append(f.audits, r); f.mu.Unlock() }
	e.WarmInterpreters = testWarmInterpreters()
	// Queued lastUsedAt stamps are flushed before the directory goes.
	t.Cleanup(func() { _ = e.Close() })
	f.engine = e
	return f
}

// testWarmInterpreters is the pool size of the package's test engines:
// none, unless EXECHOST_TEST_WARM_INTERPRETERS says how many, so that the
// whole suite (the escape tests' helper too) can run with the pool on:
//
//	EXECHOST_TEST_WARM_INTERPRETERS=2 go test -race ./internal/host
func testWarmInterpreters() int {
	n, _ := strconv.Atoi(os.Getenv("EXECHOST_TEST_WARM_INTERPRETERS"))
	return n
}

func (f *fixture) kinds() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var k []string
	for _, e := range f.events {
		k = append(k, e.Kind)
	}
	return k
}

func TestEngineDecisions(t *testing.T) {
	tests := []struct {
		name    string
		sec     policy.Security
		ask     policy.Ask
		fb      policy.Fallback
		allow   []string
		cmd     string
		wantErr error
		wantOut string
	}{
		{"deny blocks everything", policy.SecurityDeny, policy.AskOff, policy.FallbackFull, []string{"$BIN/*"}, "hello", policy.ErrDisabled, ""},
		{"allowlist match runs", policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, []string{"$BIN/hello"}, "hello a", nil, "hello a\n"},
		{"allowlist miss denied", policy.SecurityAllowlist, policy.AskOff, policy.FallbackFull, []string{"$BIN/hello"}, "other", policy.ErrAllowlistMiss, ""},
		{"chain: every segment must match", policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, []string{"$BIN/hello"}, "hello && other", policy.ErrAllowlistMiss, ""},
		{"pipeline all matched", policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, []string{"$BIN/*"}, "hello x | other", nil, "other\n"},
		// In argument position the contained rules may allow it where the
		// jail holds (contained_linux_test.go); as the command's name never.
		{"substitution as the command name never allowed", policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, []string{"$BIN/*", "/usr/bin/*", "/bin/*"}, "$(other) x", policy.ErrAllowlistMiss, ""},
		{"backquotes never allowed", policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, []string{"$BIN/*", "/usr/bin/*", "/bin/*"}, "hello `other`", policy.ErrAllowlistMiss, ""},
		{"on-miss without approver: fallback deny", policy.SecurityAllowlist, policy.AskOnMiss, policy.FallbackDeny, nil, "hello", policy.ErrApprovalRequired, ""},
		{"on-miss without approver: fallback allowlist miss", policy.SecurityAllowlist, policy.AskOnMiss, policy.FallbackAllowlist, []string{"$BIN/hello"}, "other", policy.ErrAllowlistMiss, ""},
		{"always without approver: fallback allowlist match", policy.SecurityAllowlist, policy.AskAlways, policy.FallbackAllowlist, []string{"$BIN/hello"}, "hello", nil, "hello\n"},
		{"on-miss without approver: fallback full", policy.SecurityAllowlist, policy.AskOnMiss, policy.FallbackFull, nil, "other", nil, "other\n"},
		{"full runs anything", policy.SecurityFull, policy.AskOff, policy.FallbackDeny, nil, "other; hello", nil, "other\nhello\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.sec, tt.ask, tt.fb, tt.allow...)
			res, err := f.engine.Run(context.Background(), Request{RawCommand: tt.cmd, Cwd: f.dir, AgentID: "dev"})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if res.Decision.Outcome != policy.DenyRun {
					t.Errorf("decision %+v, want deny", res.Decision)
				}
				if diff := cmp.Diff([]string{bridge.EventExecDenied}, f.kinds()); diff != "" {
					t.Errorf("events (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Stdout != tt.wantOut || res.ExitCode != 0 || !res.Success {
				t.Errorf("result %+v, want stdout %q", res.Result, tt.wantOut)
			}
			if diff := cmp.Diff([]string{bridge.EventExecStarted, bridge.EventExecFinished}, f.kinds()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEngineDenialNamesMissingExecutable(t *testing.T) {
	f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/hello")
	_, err := f.engine.Run(context.Background(), Request{RawCommand: "hello | other", Cwd: f.dir})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(f.bin, "other")) || !strings.Contains(err.Error(), "SYSTEM_RUN_DENIED: allowlist miss") {
		t.Fatalf("denial should name the missing executable and the wire error: %v", err)
	}
}

func TestEngineNothingRunsWhenDenied(t *testing.T) {
	f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/hello")
	target := filepath.Join(f.dir, "pwned")
	for _, cmd := range []string{
		"hello; marker " + target,
		"hello && marker " + target,
		"# hello\nmarker " + target,
		"hello `marker " + target + "`",
		"hello $(marker " + target + ")", // marker is not allowlisted, wherever it stands
		"$(marker " + target + ") x",
		"hello > " + target + "/../../bin/pwned", // outside the writable roots (the jail holds) or a file (it does not)
		"env marker " + target,
		"sh -c 'marker " + target + "'",
	} {
		if _, err := f.engine.Run(context.Background(), Request{RawCommand: cmd, Cwd: f.dir}); err == nil {
			t.Errorf("%q was allowed", cmd)
		}
		if _, err := os.Stat(target); err == nil {
			t.Fatalf("%q ran something", cmd)
		}
	}
}

func TestEngineRefusesDangerousEnv(t *testing.T) {
	f := newFixture(t, policy.SecurityFull, policy.AskOff, policy.FallbackDeny)
	target := filepath.Join(f.dir, "pwned")
	_, err := f.engine.Run(context.Background(), Request{RawCommand: "marker " + target, Cwd: f.dir, Env: map[string]string{"LD_PRELOAD": "/tmp/x.so"}})
	if err == nil || !strings.Contains(err.Error(), "LD_PRELOAD") {
		t.Fatalf("err = %v, want a refusal naming LD_PRELOAD", err)
	}
	if _, err := os.Stat(target); err == nil {
		t.Fatal("command ran despite a dangerous env")
	}
}

func TestEngineArgvIsWhatIsAnalysed(t *testing.T) {
	// rawCommand is only for display: the argv that runs is what must match.
	f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/hello")
	target := filepath.Join(f.dir, "pwned")
	_, err := f.engine.Run(context.Background(), Request{Argv: []string{"/bin/sh", "-c", "marker " + target}, RawCommand: "hello", Cwd: f.dir})
	if !errors.Is(err, policy.ErrAllowlistMiss) {
		t.Fatalf("err = %v, want allowlist miss", err)
	}
	res, err := f.engine.Run(context.Background(), Request{Argv: []string{"hello", "x y"}, Cwd: f.dir})
	if err != nil || res.Stdout != "hello x y\n" {
		t.Fatalf("argv run: %v %+v", err, res.Result)
	}
}

func TestEngineMalformedApprovalsFailsClosed(t *testing.T) {
	f := newFixture(t, policy.SecurityFull, policy.AskOff, policy.FallbackFull)
	bad := []byte("{\"version\": 1, \"defaults\": {\"security\": \"full\",}")
	if err := os.WriteFile(f.store.Path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := f.engine.Run(context.Background(), Request{RawCommand: "hello", Cwd: f.dir})
	if err == nil || !strings.Contains(err.Error(), f.store.Path) {
		t.Fatalf("err = %v, want a parse error naming the file", err)
	}
	got, _ := os.ReadFile(f.store.Path)
	if string(got) != string(bad) {
		t.Fatal("malformed file was rewritten")
	}
}

func TestEngineRecordsUse(t *testing.T) {
	f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/hello")
	if _, err := f.engine.Run(context.Background(), Request{RawCommand: "hello there", Cwd: f.dir}); err != nil {
		t.Fatal(err)
	}
	if err := f.engine.Close(); err != nil {
		t.Fatal(err)
	}
	file, err := f.store.Load()
	if err != nil {
		t.Fatal(err)
	}
	e := file.Agents["*"].Allowlist[0]
	if e.LastUsedAt == 0 || e.LastUsedCommand != "hello there" || e.LastResolvedPath != filepath.Join(f.bin, "hello") {
		t.Errorf("use not recorded: %+v", e)
	}
}

func TestEngineTimeoutEvent(t *testing.T) {
	f := newFixture(t, policy.SecurityFull, policy.AskOff, policy.FallbackDeny)
	res, err := f.engine.Run(context.Background(), Request{RawCommand: "sleep 30", Cwd: f.dir, TimeoutMs: 200})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.Success {
		t.Errorf("result %+v, want timed out", res.Result)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	last := f.events[len(f.events)-1]
	if last.Kind != bridge.EventExecFinished || !last.TimedOut {
		t.Errorf("last event %+v", last)
	}
}

func TestEngineStripsShellStartupEnv(t *testing.T) {
	f := newFixture(t, policy.SecurityFull, policy.AskOff, policy.FallbackDeny)
	t.Setenv("CDPATH", "/tmp")
	t.Setenv("EXECIGNORE", "*")
	t.Setenv("BASH_ENV", "/tmp/evil")
	t.Setenv("EXECHOST_TEST_KEEP", "kept")
	res, err := f.engine.Run(context.Background(), Request{Argv: []string{"/usr/bin/env"}, Cwd: f.dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"CDPATH=", "EXECIGNORE=", "BASH_ENV="} {
		if strings.Contains(res.Stdout, "\n"+name) || strings.HasPrefix(res.Stdout, name) {
			t.Errorf("%s reached the command's environment", name)
		}
	}
	if !strings.Contains(res.Stdout, "EXECHOST_TEST_KEEP=kept") {
		t.Error("ordinary variables must be kept")
	}
	if !strings.Contains(res.Stdout, "PATH="+f.bin+":/usr/bin:/bin") {
		t.Errorf("the command must see the PATH the analysis used:\n%s", res.Stdout)
	}
}

func TestDirectArgv(t *testing.T) {
	f := newFixture(t, policy.SecurityFull, policy.AskOff, policy.FallbackDeny)
	tests := []struct {
		text string
		want []string
	}{
		{"hello", []string{"hello"}},
		{"  hello a-b c.d/e  ", []string{"hello", "a-b", "c.d/e"}},
		{"hello 'a b'", nil},
		{"hello $HOME", nil},
		{"hello *.go", nil},
		{"hello ~", nil},
		{"hello a; other", nil},
		{"hello > /dev/null", nil},
		{"FOO=1 hello", nil},
		{"echo hi", nil}, // builtin with its own semantics
		{"env hello", nil},
		{"nosuchprogram", nil},
	}
	for _, tt := range tests {
		p, err := f.engine.Prepare(Request{RawCommand: tt.text, Cwd: f.dir})
		if err != nil {
			t.Fatal(err)
		}
		got, ok := p.directArgv()
		if tt.want != nil {
			tt.want = append([]string{filepath.Join(f.bin, tt.want[0])}, tt.want[1:]...)
		}
		if ok != (tt.want != nil) || !cmp.Equal(got, tt.want) {
			t.Errorf("directArgv(%q) = %q, %v; want %q", tt.text, got, ok, tt.want)
		}
	}
	// The fast path must produce the same result as the shell.
	res, err := f.engine.Run(context.Background(), Request{RawCommand: "hello a b", Cwd: f.dir})
	if err != nil || res.Stdout != "hello a b\n" {
		t.Fatalf("fast path run: %v %+v", err, res.Result)
	}
}

// TestUsageFlushesByItself checks that queued lastUsedAt stamps reach the
// file without an explicit Close, coalesced across a burst of execs.
func TestUsageFlushesByItself(t *testing.T) {
	f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/hello")
	for i := 0; i < 5; i++ {
		if _, err := f.engine.Run(context.Background(), Request{RawCommand: "hello " + string(rune('a'+i)), Cwd: f.dir}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		file, err := f.store.Load()
		if err != nil {
			t.Fatal(err)
		}
		// A run may take longer than UsageFlushDelay (a confined run
		// re-executes the binary), so an earlier run's flush may land
		// first: wait for the newest run's.
		e := file.Agents["*"].Allowlist[0]
		if e.LastUsedAt != 0 && e.LastUsedCommand == "hello e" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("usage never flushed the newest run (lastUsedAt %d, lastUsedCommand %q)", e.LastUsedAt, e.LastUsedCommand)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRunsAsTheAnalysedTree: how each kind of decided command runs, and
// that a vouched compound command never reaches /bin/sh.
func TestRunsAsTheAnalysedTree(t *testing.T) {
	tests := []struct {
		sec  policy.Security
		text string
		want string
	}{
		{policy.SecurityAllowlist, "hello a", RunsDirect},
		{policy.SecurityAllowlist, "hello a && other b | hello c", RunsInterpreted},
		{policy.SecurityAllowlist, "env A=1 hello", RunsInterpreted},
		{policy.SecurityAllowlist, "true", RunsInterpreted},
		{policy.SecurityAllowlist, "$(other) a", RunsUnchecked},
		{policy.SecurityAllowlist, "hello <<< x", RunsShellText},
		{policy.SecurityFull, "hello a && other b", RunsShellText},
	}
	for _, tt := range tests {
		f := newFixture(t, tt.sec, policy.AskOff, policy.FallbackDeny, "$BIN/hello", "$BIN/other")
		p, err := f.engine.Prepare(Request{RawCommand: tt.text, Cwd: f.dir})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.RunsAs(); got != tt.want {
			t.Errorf("%s %q runs as %q; want %q", tt.sec, tt.text, got, tt.want)
		}
	}
	// A vouched pipeline runs in the interpreter and gives the shell's output.
	f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/hello", "$BIN/other")
	res, err := f.engine.Run(context.Background(), Request{RawCommand: "hello a && other b; true | hello c", Cwd: f.dir})
	if err != nil || res.Stdout != "hello a\nother b\nhello c\n" || res.ExitCode != 0 {
		t.Fatalf("interpreted run: %v %+v", err, res.Result)
	}
}

// TestDenialIsTyped: a denial carries what was missing, structured, so no
// caller parses its text; its wire form keeps the SYSTEM_RUN_* message.
func TestDenialIsTyped(t *testing.T) {
	f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/hello")
	_, err := f.engine.Run(context.Background(), Request{RawCommand: "hello a && other b", Cwd: f.dir})
	de, ok := errors.AsType[*DenialError](err)
	if !ok || !errors.Is(err, policy.ErrAllowlistMiss) {
		t.Fatalf("err = %#v; want a *DenialError wrapping ErrAllowlistMiss", err)
	}
	if diff := cmp.Diff([]string{filepath.Join(f.bin, "other")}, de.Denial.Missing); diff != "" || de.Denial.Reason != "allowlist miss" {
		t.Errorf("denial %+v (missing -want +got):\n%s", de.Denial, diff)
	}
	if w := de.Wire(); w.Code != bridge.CodeDenied || !strings.HasPrefix(w.Message, "SYSTEM_RUN_DENIED: allowlist miss") || w.Denial == nil {
		t.Errorf("wire form = %+v", w)
	}
	_, err = f.engine.Run(context.Background(), Request{RawCommand: "hello `other`", Cwd: f.dir})
	de, ok = errors.AsType[*DenialError](err)
	if !ok || de.Denial.Construct != "command substitution `…`" || de.Denial.Position != "1:7" {
		t.Fatalf("construct denial = %#v", err)
	}
}

// TestFinishedRecordInTheLogWithTheResult: when Run returns, the run's
// decision and finished records are both in the audit log (the finished
// one written, its fdatasync possibly still to come), and Close — which
// the engine does for a log it owns — leaves the chain verifiable.
func TestFinishedRecordInTheLogWithTheResult(t *testing.T) {
	f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/hello")
	rec, err := audit.OpenRecorder(f.dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.engine.OnAudit = AuditRecorder(rec)
	f.engine.closeAudit = rec.Close
	res, err := f.engine.Run(context.Background(), Request{RawCommand: "hello", Cwd: f.dir, AgentID: "dev", RunID: "r1"})
	if err != nil || res.Stdout != "hello\n" {
		t.Fatalf("run: %+v, %v", res.Result, err)
	}
	path := filepath.Join(f.dir, state.AuditFile)
	var events []string
	if err := audit.Read(path, audit.Filter{}, func(r audit.Record) error { events = append(events, r.Event); return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{audit.EventDecision, audit.EventFinished}, events); diff != "" {
		t.Errorf("records when Run returned (-want +got):\n%s", diff)
	}
	if err := f.engine.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.engine.Run(context.Background(), Request{RawCommand: "hello", Cwd: f.dir, AgentID: "dev", RunID: "r2"}); err != nil {
		t.Fatalf("a run after Close still runs (unaudited): %v", err)
	}
	n, err := audit.Verify(path)
	if err != nil || n != 2 {
		t.Errorf("verify after Close: %d records, %v; want 2 (the run after Close is not recorded)", n, err)
	}
}
