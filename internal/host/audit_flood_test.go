package host

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/policy"
)

// TestDeniedRunsCannotFlushTheAudit is issue 40's audit door at a host
// engine: on a real log rotated at 32 KiB with two rotated files, an
// operator's run (agent main) is recorded, then one agent has 500
// commands denied. The operator's records stay in the log; the denials
// are recorded in full up to the burst, and the rest counted, exactly
// 500 in all, the count written by the engine itself an interval later
// (no other record or close needed). Control: with aggregation off the
// same denials rotate the operator's run out of every file.
func TestDeniedRunsCannotFlushTheAudit(t *testing.T) {
	const flood = 500
	for _, defended := range []bool{true, false} {
		t.Run(map[bool]string{true: "defended", false: "control"}[defended], func(t *testing.T) {
			f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/hello")
			logPath := filepath.Join(t.TempDir(), "audit.jsonl")
			l, err := audit.OpenOptions(logPath, audit.Options{MaxBytes: 32 << 10, Keep: 2})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			// A frozen clock for the limits (no refill during the flood, so
			// the count is exact); the write of the counts is timed by the
			// interval on the real clock.
			frozen := time.Now()
			agg := audit.NewAggregator(audit.AggregatorOptions{Interval: 200 * time.Millisecond, Now: func() time.Time { return frozen }})
			agg.SetOff(!defended)
			var (
				wmu    sync.Mutex
				warned []error
			)
			f.engine.OnAudit = newAuditSink(l, func(err error) { wmu.Lock(); warned = append(warned, err); wmu.Unlock() }, agg).record

			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			if _, err := f.engine.Run(ctx, Request{RawCommand: "hello operator", Cwd: f.dir, AgentID: "main", RunID: "operator-run"}); err != nil {
				t.Fatal(err)
			}
			for i := range flood {
				_, err := f.engine.Run(ctx, Request{RawCommand: fmt.Sprintf("other %d %s", i, strings.Repeat("x", 200)), Cwd: f.dir, AgentID: "ci"})
				if err == nil {
					t.Fatal("a command outside the allowlist ran")
				}
			}
			// read sums the denials recorded in full and counted.
			read := func() (operator bool, full, counted, countRecords int) {
				t.Helper()
				if err := audit.Read(logPath, audit.Filter{}, func(r audit.Record) error {
					operator = operator || r.RunID == "operator-run"
					if r.Event != audit.EventDenied || r.AgentID != "ci" {
						return nil
					}
					var n int
					if _, err := fmt.Sscanf(r.Change, "%d denials like this of agent ci", &n); err == nil {
						counted, countRecords = counted+n, countRecords+1
					} else if _, err := fmt.Sscanf(r.Change, "%d earlier denials like this", &n); err == nil {
						counted, full = counted+n, full+1
					} else {
						full++
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				return
			}
			operator, full, counted, countRecords := read()
			if defended {
				deadline := time.Now().Add(30 * time.Second)
				for full+counted != flood && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond)
					operator, full, counted, countRecords = read()
				}
			}
			removed, err := audit.RemovedFiles(logPath)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := audit.Verify(logPath); err != nil {
				t.Fatalf("verify after %d lines: %v", n, err)
			}
			t.Logf("defended=%v: operator's run in the log %v, %d denials recorded in full, %d counted in %d records, %d files removed", defended, operator, full, counted, countRecords, len(removed))
			wmu.Lock()
			defer wmu.Unlock()
			if defended {
				if !operator || full+counted != flood || full > audit.DefaultAggregateBurst || countRecords == 0 || len(removed) != 0 || len(warned) != 0 {
					t.Fatalf("operator's run in the log: %v; %d full + %d counted, want %d with at most %d in full; %d files removed; warnings %v", operator, full, counted, flood, audit.DefaultAggregateBurst, len(removed), warned)
				}
				return
			}
			if operator {
				t.Fatal("control: 500 unaggregated denials did not rotate the operator's run out: the test shows nothing")
			}
		})
	}
}

// TestDenialCountsWrittenAtClose: denials left out and not yet counted
// when the log closes are counted then (Log.BeforeClose), so a shutdown
// loses no count. Control: a human's denial is never aggregated.
func TestDenialCountsWrittenAtClose(t *testing.T) {
	f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/hello")
	logPath := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := audit.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	agg := audit.NewAggregator(audit.AggregatorOptions{Burst: 2, Interval: time.Hour, Now: func() time.Time { return frozen }})
	sink := newAuditSink(l, nil, agg)
	f.engine.OnAudit = sink.record
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 7 {
		if _, err := f.engine.Run(ctx, Request{RawCommand: "other", Cwd: f.dir, AgentID: "ci"}); err == nil {
			t.Fatal("a command outside the allowlist ran")
		}
	}
	human := AuditRecord{Event: audit.EventDenied, Request: Request{RawCommand: "other", AgentID: "ci"}, Decision: policy.Decision{Outcome: policy.DenyRun, Reason: "denied by the user", Setting: policy.SettingApprover}}
	for range 3 {
		sink.record(human)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var changes []string
	humans := 0
	if err := audit.Read(logPath, audit.Filter{}, func(r audit.Record) error {
		if r.Reason == "denied by the user" {
			humans++
			return nil
		}
		changes = append(changes, r.Change)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if humans != 3 {
		t.Errorf("a human's denials recorded %d times, want every one (3)", humans)
	}
	if len(changes) != 3 || changes[0] != "" || changes[1] != "" || !strings.HasPrefix(changes[2], "5 denials like this of agent ci not recorded") {
		t.Fatalf("records of 7 denials with burst 2: %q, want 2 in full and one counting 5 written at close", changes)
	}
}
