package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofrs/flock"
	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/state"
	"github.com/exechost/exechost/internal/testproc"
)

// helperEnv makes the test binary an appender process (see TestMain).
const helperEnv = "EXECHOST_AUDIT_HELPER"

// TestMain doubles as a helper process for the cross-process test: with
// EXECHOST_AUDIT_HELPER=path:count:tag it appends count records and exits.
func TestMain(m *testing.M) {
	if v := os.Getenv(helperEnv); v != "" {
		os.Exit(helperAppend(v))
	}
	os.Exit(m.Run())
}

func helperAppend(spec string) int {
	parts := strings.Split(spec, ":")
	path, tag := parts[0], parts[2]
	count, _ := strconv.Atoi(parts[1])
	l, err := OpenOptions(path, Options{MaxBytes: 16 << 10, Keep: 100, LockTimeout: time.Minute})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer l.Close()
	for i := range count {
		if err := l.Append(rec(tag, i)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

// rec builds a recognisable record.
func rec(agent string, i int) Record {
	return Record{
		Event:         EventDecision,
		RunID:         fmt.Sprintf("%s-%d", agent, i),
		AgentID:       agent,
		Host:          "gateway",
		Argv:          []string{"/bin/echo", strconv.Itoa(i)},
		Command:       "echo " + strconv.Itoa(i),
		Cwd:           "/tmp",
		ResolvedPaths: []string{"/bin/echo"},
		Decision:      DecisionAllow,
		Reason:        "allowlist",
		DecidedBy:     "policy",
	}
}

func logPath(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), state.AuditFile)
}

func openLog(t *testing.T, path string, opts Options) *Log {
	t.Helper()
	l, err := OpenOptions(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func readAll(t *testing.T, path string, f Filter) []Record {
	t.Helper()
	var out []Record
	if err := Read(path, f, func(r Record) error { out = append(out, r); return nil }); err != nil {
		t.Fatalf("Read: %v", err)
	}
	return out
}

func mustVerify(t *testing.T, path string, want int) {
	t.Helper()
	n, err := Verify(path)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if n != want {
		t.Fatalf("Verify counted %d lines, want %d", n, want)
	}
}

func TestAppendReadRoundTrip(t *testing.T) {
	path := logPath(t)
	l := openLog(t, path, Options{})
	code := 3
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	in := []Record{
		{Time: t0, Event: EventDecision, RunID: "r1", SessionKey: "s", AgentID: "main", Host: "node", NodeID: "n1",
			Argv: []string{"ls", "-l"}, Command: "ls -l <x> & \"y\"\n", Cwd: "/w", ResolvedPaths: []string{"/bin/ls"},
			Decision: DecisionAsk, Reason: "allowlist-miss", DecidedBy: "approver-web", Approval: "allow-once"},
		{Time: t0.Add(time.Second), Event: EventFinished, RunID: "r1", AgentID: "main", Host: "node", ExitCode: &code,
			TimedOut: true, DurationMs: 1500, Truncated: true},
		{Time: t0.Add(2 * time.Second), Event: EventDenied, RunID: "r2", AgentID: "other", Host: "gateway",
			Decision: DecisionDeny, Reason: "askFallback=deny", DecidedBy: "askFallback", Fallback: true},
	}
	for _, r := range in {
		if err := l.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	got := readAll(t, path, Filter{})
	if len(got) != len(in) {
		t.Fatalf("read %d records, want %d", len(got), len(in))
	}
	if got[0].Prev != "" {
		t.Errorf("first record prev = %q, want empty", got[0].Prev)
	}
	for i := range got {
		if i > 0 && got[i].Prev != got[i-1].Hash {
			t.Errorf("record %d prev %q != hash of record %d %q", i, got[i].Prev, i-1, got[i-1].Hash)
		}
		in[i].Prev, in[i].Hash = got[i].Prev, got[i].Hash
	}
	if d := cmp.Diff(in, got); d != "" {
		t.Errorf("records (-want +got):\n%s", d)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	if n := bytes.Count(data, []byte("\n")); n != 3 {
		t.Errorf("file has %d lines, want 3 (one record per line)", n)
	}
	mustVerify(t, path, 3)
}

func TestAppendFillsTimeAndRejectsUnknownEvent(t *testing.T) {
	path := logPath(t)
	l := openLog(t, path, Options{})
	before := time.Now()
	if err := l.Append(Record{Event: EventDenied}); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, path, Filter{})
	if got[0].Time.Before(before.Add(-time.Second)) || got[0].Time.Location() != time.UTC {
		t.Errorf("time = %v, want now in UTC", got[0].Time)
	}
	if err := l.Append(Record{Event: "bogus"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Append(bogus event) = %v, want ErrInvalid", err)
	}
	l.Close()
	if err := l.Append(rec("a", 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close = %v, want ErrClosed", err)
	}
}

func TestFilter(t *testing.T) {
	path := logPath(t)
	l := openLog(t, path, Options{})
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	for i, agent := range []string{"alpha", "beta", "alpha", "gamma"} {
		r := rec(agent, i)
		r.Time = t0.Add(time.Duration(i) * time.Hour)
		if i == 3 {
			r.Decision, r.Command, r.Event = DecisionDeny, "rm -rf /SECRET", EventDenied
		}
		if err := l.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		f    Filter
		want []string // run ids
	}{
		{"all", Filter{}, []string{"alpha-0", "beta-1", "alpha-2", "gamma-3"}},
		{"agent", Filter{Agent: "alpha"}, []string{"alpha-0", "alpha-2"}},
		{"since", Filter{Since: t0.Add(90 * time.Minute)}, []string{"alpha-2", "gamma-3"}},
		{"decision", Filter{Decision: "deny"}, []string{"gamma-3"}},
		{"text case-insensitive", Filter{Text: "secret"}, []string{"gamma-3"}},
		{"text resolved path", Filter{Text: "/bin/echo"}, []string{"alpha-0", "beta-1", "alpha-2", "gamma-3"}},
		{"combined", Filter{Agent: "alpha", Since: t0.Add(time.Minute)}, []string{"alpha-2"}},
		{"none", Filter{Agent: "nobody"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, r := range readAll(t, path, tt.f) {
				got = append(got, r.RunID)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("run ids (-want +got):\n%s", d)
			}
		})
	}
}

func TestConcurrentGoroutines(t *testing.T) {
	path := logPath(t)
	// Two Logs on one path behave like two processes sharing the file.
	logs := []*Log{openLog(t, path, Options{MaxBytes: 8 << 10, Keep: 1000}), openLog(t, path, Options{MaxBytes: 8 << 10, Keep: 1000})}
	const workers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if err := logs[w%2].Append(rec("w"+strconv.Itoa(w), i)); err != nil {
					errs <- err
				}
			}
		})
	}
	testproc.WaitGroup(t, &wg, "the concurrent appenders")
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	mustVerify(t, path, workers*each)
	seen := map[string]bool{}
	for _, r := range readAll(t, path, Filter{}) {
		if seen[r.RunID] {
			t.Errorf("run id %s appears twice", r.RunID)
		}
		seen[r.RunID] = true
	}
	if len(seen) != workers*each {
		t.Errorf("read %d distinct records, want %d", len(seen), workers*each)
	}
}

func TestConcurrentProcesses(t *testing.T) {
	path := logPath(t)
	const procs, each = 4, 200
	var cmds []*exec.Cmd
	for p := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s:%d:p%d", helperEnv, path, each, p))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if stderr.Len() > 0 {
				t.Logf("helper %d stderr: %s", p, stderr.String())
			}
		})
		cmds = append(cmds, cmd)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("helper %d: %v", i, err)
		}
	}
	mustVerify(t, path, procs*each)
	per := map[string]int{}
	for _, r := range readAll(t, path, Filter{}) {
		per[r.AgentID]++
	}
	want := map[string]int{"p0": each, "p1": each, "p2": each, "p3": each}
	if d := cmp.Diff(want, per); d != "" {
		t.Errorf("records per process (-want +got):\n%s", d)
	}
	if rot, _ := rotatedFiles(path); len(rot) == 0 {
		t.Errorf("expected rotation with 16 KiB files, found none")
	}
}

func TestRotationKeepsChain(t *testing.T) {
	path := logPath(t)
	l := openLog(t, path, Options{MaxBytes: 2 << 10, Keep: 50})
	const total = 60
	for i := range total {
		if err := l.Append(rec("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	rot, err := rotatedFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rot) < 3 {
		t.Fatalf("got %d rotated files, want several", len(rot))
	}
	for _, name := range append(rot, path) {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 2<<10 {
			t.Errorf("%s is %d bytes, over MaxBytes", name, fi.Size())
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", name, fi.Mode().Perm())
		}
	}
	// The newest file's first line continues the chain of audit.jsonl.1.
	last1, err := lastHashOf(rotatedName(path, 1))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	first, _, _ := bytes.Cut(data, []byte("\n"))
	key, err := loadChainKey(path)
	if err != nil || key == nil {
		t.Fatalf("chain key: %v %v", key, err)
	}
	r, keyed, err := parseLine(first, key)
	if err != nil || !keyed {
		t.Fatalf("first line: keyed %v, %v", keyed, err)
	}
	if r.Prev != last1 || last1 == "" {
		t.Errorf("first line of new file prev = %q, want last hash of .1 %q", r.Prev, last1)
	}
	mustVerify(t, path, total)
	got := readAll(t, path, Filter{})
	for i, r := range got {
		if want := fmt.Sprintf("a-%d", i); r.RunID != want {
			t.Fatalf("record %d is %s, want %s (oldest to newest across files)", i, r.RunID, want)
		}
	}
}

func TestRotationPrunesAndStillVerifies(t *testing.T) {
	path := logPath(t)
	l := openLog(t, path, Options{MaxBytes: 1 << 10, Keep: 2})
	for i := range 40 {
		if err := l.Append(rec("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	rot, _ := rotatedFiles(path)
	if d := cmp.Diff([]string{rotatedName(path, 2), rotatedName(path, 1)}, rot); d != "" {
		t.Errorf("rotated files (-want +got):\n%s", d)
	}
	n, err := Verify(path)
	if err != nil {
		t.Fatalf("Verify after pruning: %v", err)
	}
	if n == 0 || n >= 40 {
		t.Errorf("Verify counted %d lines, want some but fewer than 40 after pruning", n)
	}
}

func TestTamperDetection(t *testing.T) {
	tests := []struct {
		name     string
		edit     func(lines [][]byte) [][]byte
		wantLine int
		wantErr  error
	}{
		{"edited field", func(ls [][]byte) [][]byte {
			ls[4] = bytes.Replace(ls[4], []byte(`"echo 4"`), []byte(`"echo 5"`), 1)
			return ls
		}, 5, ErrTampered},
		// Rehashing without the chain key: the edited line itself fails.
		{"rehashed edit", func(ls [][]byte) [][]byte {
			r, _, _ := parseLine(ls[4], nil)
			r.Command = "innocent"
			line, _, _ := encodeLine(r)
			ls[4] = bytes.TrimSuffix(line, []byte("\n"))
			return ls
		}, 5, ErrTampered},
		// Issue 32: rewrite a record and recompute every hash after it,
		// as someone without the key can.
		{"rewritten and rehashed to the end", func(ls [][]byte) [][]byte {
			prev := ""
			for i := range ls {
				var r Record
				if json.Unmarshal(ls[i], &r) != nil {
					break // the preallocated zero tail
				}
				if i == 4 {
					r.Decision = DecisionAllow
				}
				if i > 0 {
					r.Prev = prev
				}
				line, h, _ := encodeLine(r)
				ls[i], prev = bytes.TrimSuffix(line, []byte("\n")), h
			}
			return ls
		}, 1, ErrTampered},
		{"deleted line", func(ls [][]byte) [][]byte {
			return append(ls[:3:3], ls[4:]...)
		}, 4, ErrTampered},
		{"swapped lines", func(ls [][]byte) [][]byte {
			ls[2], ls[3] = ls[3], ls[2]
			return ls
		}, 3, ErrTampered},
		{"duplicated line", func(ls [][]byte) [][]byte {
			return append(ls[:6:6], ls[5:]...)
		}, 7, ErrTampered},
		{"garbage line", func(ls [][]byte) [][]byte {
			ls[1] = []byte(`{"not":"audit"}`)
			return ls
		}, 2, ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := logPath(t)
			l := openLog(t, path, Options{})
			for i := range 10 {
				if err := l.Append(rec("a", i)); err != nil {
					t.Fatal(err)
				}
			}
			mustVerify(t, path, 10)
			data, _ := os.ReadFile(path)
			lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
			lines = tt.edit(lines)
			if err := os.WriteFile(path, append(bytes.Join(lines, []byte("\n")), '\n'), 0o600); err != nil {
				t.Fatal(err)
			}
			n, err := Verify(path)
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("Verify = %d, %v; want a *LineError", n, err)
			}
			if le.File != path || le.Line != tt.wantLine || !errors.Is(err, tt.wantErr) {
				t.Errorf("Verify error = %v; want %s:%d wrapping %v", err, path, tt.wantLine, tt.wantErr)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("%s:%d:", path, tt.wantLine)) {
				t.Errorf("error %q does not name file:line", err)
			}
			if n != tt.wantLine-1 {
				t.Errorf("Verify counted %d good lines, want %d", n, tt.wantLine-1)
			}
			// Read still returns the intact records and reports the damage.
			var got int
			err = Read(path, Filter{}, func(Record) error { got++; return nil })
			if tt.wantErr == ErrCorrupt || tt.name == "edited field" {
				if !errors.As(err, &le) || got == 0 {
					t.Errorf("Read = %d records, %v; want the good ones and a *LineError", got, err)
				}
			}
		})
	}
}

func TestTamperInRotatedFile(t *testing.T) {
	path := logPath(t)
	l := openLog(t, path, Options{MaxBytes: 2 << 10, Keep: 50})
	for i := range 40 {
		if err := l.Append(rec("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	// Drop the last line of .2: the first line of .1 no longer links.
	name := rotatedName(path, 2)
	data, _ := os.ReadFile(name)
	lines := bytes.SplitAfter(data, []byte("\n"))
	lines = lines[:len(lines)-2] // last element is empty
	if err := os.WriteFile(name, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Verify(path)
	var le *LineError
	if !errors.As(err, &le) || le.File != rotatedName(path, 1) || le.Line != 1 || !errors.Is(err, ErrTampered) {
		t.Errorf("Verify = %v; want %s:1 chain broken", err, rotatedName(path, 1))
	}
}

// TestInterruptedAppendIsCut damages the end of the log the ways a crash
// can and checks that readers skip the damage, Verify reports it, and the
// next append cuts it off so the chain continues from the last good line.
func TestInterruptedAppendIsCut(t *testing.T) {
	whole, _, err := encodeLine(rec("x", 98))
	if err != nil {
		t.Fatal(err)
	}
	more, _, _ := encodeLine(rec("x", 99))
	partial := []byte(`{"time":"2026-01-01T00:00:00Z","event":"deci`)
	// writeAtEnd writes b at the end of the data, where an append of this
	// version writes.
	writeAtEnd := func(t *testing.T, path string, b []byte) {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fi, _ := f.Stat()
		end, err := dataEnd(f, fi.Size())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(b, end); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		// reopen closes the log before the damage and appends through a
		// fresh one, as after a restart.
		reopen bool
		damage func(t *testing.T, path string)
		// readable is how many records Read returns while damaged (-1:
		// Read reports a bad line).
		readable int
	}{
		{"process died mid-write", false, func(t *testing.T, path string) { writeAtEnd(t, path, partial) }, 3},
		{"process died mid-write, log reopened", true, func(t *testing.T, path string) { writeAtEnd(t, path, partial) }, 3},
		{
			// The first page of a group never reached the disk but later
			// bytes did: a NUL run inside the data, then more lines.
			"system crash tore a group", true, func(t *testing.T, path string) {
				torn := append(make([]byte, 100), whole[100:]...)
				writeAtEnd(t, path, append(torn, more...))
			}, -1,
		},
		{
			"unterminated line after a zero tail an earlier version left", true, func(t *testing.T, path string) {
				f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.Write(make([]byte, 4096))
				f.Write(partial)
				f.Close()
			}, 3,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := logPath(t)
			l := openLog(t, path, Options{})
			for i := range 3 {
				if err := l.Append(rec("a", i)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.reopen {
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
			}
			tc.damage(t, path)
			var got []Record
			rerr := Read(path, Filter{}, func(r Record) error { got = append(got, r); return nil })
			switch {
			case tc.readable >= 0 && (rerr != nil || len(got) != tc.readable):
				t.Errorf("Read while damaged: %d records, %v; want %d records", len(got), rerr, tc.readable)
			case tc.readable < 0 && !errors.Is(rerr, ErrCorrupt):
				t.Errorf("Read while damaged = %v, want ErrCorrupt", rerr)
			}
			if _, err := Verify(path); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Verify while damaged = %v, want ErrCorrupt", err)
			}
			if tc.reopen {
				l = openLog(t, path, Options{})
			}
			if err := l.Append(rec("a", 3)); err != nil {
				t.Fatal(err)
			}
			mustVerify(t, path, 4)
			var ids []string
			for _, r := range readAll(t, path, Filter{}) {
				ids = append(ids, r.RunID)
			}
			if d := cmp.Diff([]string{"a-0", "a-1", "a-2", "a-3"}, ids); d != "" {
				t.Errorf("records after the cut (-want +got):\n%s", d)
			}
		})
	}
}

func TestOpenRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, state.AuditFile)
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if l, err := Open(path); err == nil {
		l.Close()
		t.Fatal("Open followed a symlink at the audit path")
	}
}

func TestOpenTightensMode(t *testing.T) {
	path := logPath(t)
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	l := openLog(t, path, Options{})
	_ = l
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestAppendLockTimeout(t *testing.T) {
	path := logPath(t)
	l := openLog(t, path, Options{LockTimeout: 50 * time.Millisecond})
	// Another holder of the lock (a different open file description, as in
	// another process).
	other := flock.New(path + ".lock")
	if ok, err := other.TryLock(); !ok || err != nil {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	if err := l.Append(rec("a", 0)); !errors.Is(err, ErrLockTimeout) {
		t.Errorf("Append while locked = %v, want ErrLockTimeout", err)
	}
	other.Unlock()
	if err := l.Append(rec("a", 1)); err != nil {
		t.Errorf("Append after unlock: %v", err)
	}
	mustVerify(t, path, 1)
}

// TestAppendLockFileReplaced: the lock file is removed while a Log keeps
// its descriptor open, and another writer creates a new one and holds it.
// The Log must lock the file now at the path (so it waits), not the
// unlinked one it still has open.
func TestAppendLockFileReplaced(t *testing.T) {
	path := logPath(t)
	l := openLog(t, path, Options{LockTimeout: 50 * time.Millisecond})
	if err := l.Append(rec("a", 0)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path + ".lock"); err != nil {
		t.Fatal(err)
	}
	other := flock.New(path + ".lock")
	if ok, err := other.TryLock(); !ok || err != nil {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	if err := l.Append(rec("a", 1)); !errors.Is(err, ErrLockTimeout) {
		t.Errorf("Append while the new lock file is held = %v, want ErrLockTimeout", err)
	}
	other.Unlock()
	if err := l.Append(rec("a", 2)); err != nil {
		t.Errorf("Append after unlock: %v", err)
	}
	mustVerify(t, path, 2)
}

func TestReadMissingLog(t *testing.T) {
	err := Read(logPath(t), Filter{}, func(Record) error { return nil })
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "hint:") {
		t.Errorf("Read(missing) = %v, want ErrNotExist with a hint", err)
	}
}

func TestReadStopsOnCallbackError(t *testing.T) {
	path := logPath(t)
	l := openLog(t, path, Options{})
	for i := range 5 {
		l.Append(rec("a", i))
	}
	stop := errors.New("enough")
	n := 0
	err := Read(path, Filter{}, func(Record) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 2 {
		t.Errorf("Read = %v after %d records, want the callback's error after 2", err, n)
	}
}

func TestFollow(t *testing.T) {
	path := logPath(t)
	l := openLog(t, path, Options{MaxBytes: 2 << 10, Keep: 50})
	l.Append(rec("old", 0)) // before Follow: not reported
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan string, 100)
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		close(started)
		done <- Follow(ctx, path, Filter{Agent: "new"}, 5*time.Millisecond, func(r Record) error {
			got <- r.RunID
			return nil
		})
	}()
	testproc.Recv(t, started, "Follow's start")
	// Follow may start after some of these appends; wait for the first to
	// show up before writing the rest, so none can be missed.
	var firstSeen string
	next := 0 // the next index to append
	for firstSeen == "" {
		if err := l.Append(rec("new", next)); err != nil {
			t.Fatal(err)
		}
		next++
		select {
		case firstSeen = <-got:
		case <-time.After(20 * time.Millisecond):
		}
	}
	first, _ := strconv.Atoi(strings.TrimPrefix(firstSeen, "new-"))
	last := next + 30 // enough to rotate several times
	for i := next; i <= last; i++ {
		if err := l.Append(rec("new", i)); err != nil {
			t.Fatal(err)
		}
		if err := l.Append(rec("skip", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := first + 1; i <= last; i++ {
		select {
		case id := <-got:
			if w := fmt.Sprintf("new-%d", i); id != w {
				t.Fatalf("followed %s, want %s", id, w)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("timed out waiting for new-%d", i)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Follow: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("timed out after a minute waiting for Follow to return after its context was canceled")
	}
}

func BenchmarkAppend(b *testing.B) {
	path := filepath.Join(b.TempDir(), state.AuditFile)
	l, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	r := rec("bench", 0)
	for b.Loop() {
		if err := l.Append(r); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzParseLine(f *testing.F) {
	code := 0
	good, _, _ := encodeLine(Record{Event: EventFinished, RunID: "r", ExitCode: &code, Argv: []string{"a", "b"}})
	f.Add(good)
	f.Add(bytes.TrimSuffix(good, []byte("\n")))
	f.Add([]byte(`{"hash":"` + strings.Repeat("0", 64) + `"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"time":5,"hash":"` + strings.Repeat("a", 64) + `"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := ParseLine(line)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTampered) {
				t.Fatalf("error %v wraps neither ErrCorrupt nor ErrTampered", err)
			}
			return
		}
		if len(r.Hash) != 64 {
			t.Fatalf("accepted line with hash %q", r.Hash)
		}
		// A line ParseLine accepts must keep verifying when re-encoded
		// from the record it yields.
		again, h, err := encodeLine(r)
		if err != nil {
			t.Fatalf("re-encode accepted record: %v", err)
		}
		r2, err := ParseLine(again)
		if err != nil || r2.Hash != h {
			t.Fatalf("re-encoded line does not parse: %v", err)
		}
	})
}
