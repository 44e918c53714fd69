package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Rotation drops the oldest file; before it does, the lines that record
// what an operator or the pairing machinery did are copied, verbatim, to
// SecurityPath, and what the file held is summarised in RemovedPath. Both
// are appended to and never rotated: agents' traffic (runs, refusals)
// never reaches them, so however much of it there is, it pushes no
// security record out of the log, and `audit verify` can say what
// rotation removed instead of "hash chain intact" alone.

// securityActions are the gateway actions whose records rotation keeps
// (events.go): pairing, credentials, policy edits, operator answers.
// Unexported so no caller can drop one from what rotation keeps;
// SecurityActions returns a copy.
var securityActions = []string{
	ActionNodeApprove, ActionNodeReject, ActionNodeRemove, ActionJoinKeyIssue, ActionJoinKeyUse,
	ActionApprovalsEdit, ActionBindingEdit, ActionElevated, ActionApprovalRelay, ActionCredentialRevoke,
}

// SecurityActions returns the actions whose records rotation keeps, a
// fresh copy on every call.
func SecurityActions() []string { return slices.Clone(securityActions) }

// IsSecurity reports whether r is a record rotation keeps.
func IsSecurity(r Record) bool { return slices.Contains(securityActions, r.Action) }

// SecurityPath is where rotation keeps the security records of the log at
// path.
func SecurityPath(path string) string { return path + ".security" }

// RemovedPath is where rotation summarises each file it removed.
func RemovedPath(path string) string { return path + ".removed" }

// Removed is one rotated file that rotation deleted, as RemovedPath keeps it.
type Removed struct {
	// At is when the file was removed.
	At time.Time `json:"at"`
	// Lines is how many lines it held; SecurityKept how many of them were
	// copied to SecurityPath.
	Lines        int `json:"lines"`
	SecurityKept int `json:"securityKept"`
	// From and To are the times of its first and last record.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// FirstPrev and LastHash delimit its part of the chain: the file after
	// it begins with a line whose prev is LastHash.
	FirstPrev string `json:"firstPrev"`
	LastHash  string `json:"lastHash"`
}

// retain copies the security lines of the rotated file name to
// SecurityPath and appends its summary to RemovedPath, both synced,
// before rotation removes name. A file that cannot be read is summarised
// as far as it was read: rotation must go on (the disk is bounded), and
// the summary says so by its counts.
func (l *Log) retain(name string) error {
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("audit rotate: read %s: %w", name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("audit rotate: stat %s: %w", name, err)
	}
	var kept []byte
	sum := Removed{At: time.Now().UTC()}
	_ = scanLines(f, fi.Size(), func(line []byte, _ int, partial, tooLong bool) error {
		if partial || tooLong {
			return nil
		}
		var r struct {
			Time   time.Time `json:"time"`
			Action string    `json:"action"`
			Prev   string    `json:"prev"`
			Hash   string    `json:"hash"`
		}
		if json.Unmarshal(line, &r) != nil {
			return nil
		}
		if sum.Lines == 0 {
			sum.From, sum.FirstPrev = r.Time, r.Prev
		}
		sum.Lines++
		sum.To, sum.LastHash = r.Time, r.Hash
		if slices.Contains(securityActions, r.Action) {
			kept = append(kept, line...)
			if kept[len(kept)-1] != '\n' {
				kept = append(kept, '\n')
			}
			sum.SecurityKept++
		}
		return nil
	})
	if len(kept) > 0 {
		if err := appendSynced(SecurityPath(l.path), kept); err != nil {
			return err
		}
	}
	b, _ := json.Marshal(sum)
	return appendSynced(RemovedPath(l.path), append(b, '\n'))
}

// appendSynced appends data to path (0600, created if needed) and syncs.
func appendSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|openFlags, 0o600)
	if err != nil {
		return fmt.Errorf("audit rotate: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("audit rotate: write %s: %w", filepath.Base(path), err)
	}
	return nil
}

// RemovedFiles returns what rotation removed from the log at path, oldest
// first (none when nothing was).
func RemovedFiles(path string) ([]Removed, error) {
	data, err := os.ReadFile(RemovedPath(path))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", RemovedPath(path), err)
	}
	var out []Removed
	for i, line := range splitLines(data) {
		var r Removed
		if err := json.Unmarshal(line, &r); err != nil {
			return out, fmt.Errorf("%s line %d: %w: %v", RemovedPath(path), i+1, ErrCorrupt, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// VerifySecurity checks each line rotation kept in SecurityPath against
// its own hash (keyed with the log's chain key): the lines are no longer
// contiguous, so each stands alone. It returns the records and the first
// bad line's error.
func VerifySecurity(path string) ([]Record, error) {
	data, err := os.ReadFile(SecurityPath(path))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", SecurityPath(path), err)
	}
	key, err := loadChainKey(path)
	if err != nil {
		return nil, err
	}
	var out []Record
	for i, line := range splitLines(data) {
		r, keyed, err := parseLine(line, key)
		if err == nil && key != nil && !keyed {
			err = fmt.Errorf("%w: an unkeyed line", ErrTampered)
		}
		if err != nil {
			return out, &LineError{File: filepath.Base(SecurityPath(path)), Line: i + 1, Err: err}
		}
		out = append(out, r)
	}
	return out, nil
}

func splitLines(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		i := 0
		for i < len(data) && data[i] != '\n' {
			i++
		}
		if i > 0 {
			out = append(out, data[:i])
		}
		if i < len(data) {
			i++
		}
		data = data[i:]
	}
	return out
}

// RotationReport says, in one line, what rotation removed from the log at
// path and what it kept ("" when it removed nothing), after checking each
// kept security record's hash. `audit verify` prints it: a chain intact
// from its oldest remaining line says nothing of the files before it.
func RotationReport(path string) (string, error) {
	removed, err := RemovedFiles(path)
	if err != nil {
		return "", err
	}
	kept, err := VerifySecurity(path)
	if err != nil {
		return "", err
	}
	if len(removed) == 0 && len(kept) == 0 {
		return "", nil
	}
	lines := 0
	for _, r := range removed {
		lines += r.Lines
	}
	msg := fmt.Sprintf("rotation removed %d files (%d lines", len(removed), lines)
	if len(removed) > 0 {
		msg += fmt.Sprintf(", %s to %s", removed[0].From.Format(time.RFC3339), removed[len(removed)-1].To.Format(time.RFC3339))
	}
	msg += fmt.Sprintf("); %d security records kept in %s, each hash intact", len(kept), filepath.Base(SecurityPath(path)))
	return msg, nil
}
