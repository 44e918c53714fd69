package audit

import (
	"path/filepath"

	"github.com/exechost/exechost/internal/state"
)

// Recorder is the one way a process records to its state directory's
// audit log: host engines and the gateway alike. A failed append is
// reported through the warn function given to OpenRecorder and returned;
// callers decide whether it stops anything (a denial is still a denial; a
// run is not held up by a full disk). A nil *Recorder records nothing.
type Recorder struct {
	log  *Log
	warn func(error)
}

// OpenRecorder opens <stateDir>/audit.jsonl for appending. warn (may be
// nil) hears about every failed append so the operator learns of it.
func OpenRecorder(stateDir string, warn func(error)) (*Recorder, error) {
	l, err := Open(filepath.Join(stateDir, state.AuditFile))
	if err != nil {
		return nil, err
	}
	if warn == nil {
		warn = func(error) {}
	}
	return &Recorder{log: l, warn: warn}, nil
}

// Record appends rec. It returns once the line is durable (Append's
// contract), so a caller that records before acting never acts unrecorded
// unless it ignores the error.
func (r *Recorder) Record(rec Record) error {
	if r == nil {
		return nil
	}
	if err := r.log.Append(rec); err != nil {
		r.warn(err)
		return err
	}
	return nil
}

// Log returns the underlying log (for host.AuditTo), or nil.
func (r *Recorder) Log() *Log {
	if r == nil {
		return nil
	}
	return r.log
}

// Warn reports an append failure the caller saw itself (host.AuditTo's
// hook), through the same channel as Record's.
func (r *Recorder) Warn(err error) {
	if r != nil {
		r.warn(err)
	}
}

// Close closes the log; later records fail with ErrClosed.
func (r *Recorder) Close() error {
	if r == nil {
		return nil
	}
	return r.log.Close()
}
