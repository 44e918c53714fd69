//go:build linux

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gofrs/flock"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/state"
)

// auditRows compares audit.Log.Append (group commit, fdatasync into blocks
// reserved past the end) with the design it replaced, kept here only as the
// baseline: every append takes the mutex and the file lock, writes with
// O_APPEND and fsyncs before releasing them. Both encode, hash and write the
// same record to files on the same disk.
func (b *bench) auditRows() {
	sec := "Audit log append (fsync-class durability)"
	dir := filepath.Join(b.tmp, "audit")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.add(row{section: sec, what: "audit.Log.Append", err: err})
		return
	}
	rec := audit.Record{Event: audit.EventDecision, RunID: "bench", AgentID: "main", Host: "gateway",
		Argv: []string{"/bin/true"}, Command: "/bin/true", Cwd: "/tmp", ResolvedPaths: []string{"/bin/true"},
		Decision: audit.DecisionAllow, Reason: "allowlist", DecidedBy: "policy"}

	fin := rec
	code := 0
	fin.Event, fin.ExitCode, fin.DurationMs = audit.EventFinished, &code, 1

	old, err := newSyncEachLog(filepath.Join(dir, "old.jsonl"))
	if err != nil {
		b.add(row{section: sec, what: "fsync per append (baseline)", err: err})
		return
	}
	defer old.close()
	l, err := audit.Open(filepath.Join(dir, state.AuditFile))
	if err != nil {
		b.add(row{section: sec, what: "audit.Log.Append", err: err})
		return
	}
	defer l.Close()

	ops := []op{
		{name: "fsync per append under the lock (baseline)", run: func() error { return old.append(rec) }},
		{name: "audit.Log.Append, one appender", run: func() error { return l.Append(rec) }},
		{name: "audit.Log.Write, one writer", run: func() error { return l.Write(fin, nil) }},
	}
	s, errs := interleave(20, b.iters(400, 80), ops)
	b.add(row{section: sec, what: ops[0].name, s: s[0], err: errs[0],
		note: "the replaced design: mutex + flock held across write(O_APPEND) + fsync, one line per call"})
	b.add(row{section: sec, what: ops[1].name, s: s[1], baseline: &s[0], err: errs[1],
		note: "group commit of one: pwrite at the end into reserved blocks (fallocate KEEP_SIZE), lock released, fdatasync (data and the new size)"})
	b.add(row{section: sec, what: ops[2].name, s: s[2], baseline: &s[0], err: errs[2],
		note: "a run's finished record: returns once the pwrite is done (by the caller when no group is in flight); its fdatasync follows on another goroutine"})

	d := time.Duration(b.iters(4, 1)) * time.Second
	oldRate, oerr := opsRate(d, func(int) error { return old.append(rec) })
	newRate, nerr := opsRate(d, func(int) error { return l.Append(rec) })
	base := sample{value: oldRate, unit: "appends/s", better: +1}
	b.add(row{section: sec, what: fmt.Sprintf("fsync per append, %d appenders (baseline)", concurrency), s: base, err: oerr,
		note: "the replaced design, concurrent callers queue on the lock"})
	b.add(row{section: sec, what: fmt.Sprintf("audit.Log.Append, %d appenders", concurrency), s: sample{value: newRate, unit: "appends/s", better: +1},
		baseline: &base, err: nerr, note: "concurrent appends share one fdatasync per group"})
}

// syncEachLog is the baseline only: the previous append path's costs (lock
// held across write and fsync), without the chain bookkeeping.
type syncEachLog struct {
	mu   sync.Mutex
	lock *flock.Flock
	f    *os.File
}

func newSyncEachLog(path string) (*syncEachLog, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	return &syncEachLog{lock: flock.New(path + ".lock"), f: f}, nil
}

func (s *syncEachLog) append(r audit.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.lock.Lock(); err != nil {
		return err
	}
	defer s.lock.Unlock()
	if _, err := s.f.Stat(); err != nil { // the old path stat'ed for the chain head
		return err
	}
	r.Time = time.Now().UTC()
	line, err := json.Marshal(r) // the old path encoded and hashed under the lock
	if err != nil {
		return err
	}
	sum := sha256.Sum256(line)
	line = append(line, hex.EncodeToString(sum[:])...)
	if _, err := s.f.Write(append(line, '\n')); err != nil {
		return err
	}
	return s.f.Sync()
}

func (s *syncEachLog) close() { s.f.Close(); s.lock.Close() }
