package audit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gofrs/flock"

	"github.com/exechost/exechost/internal/hint"
)

// Filter selects records for Read. Zero fields match everything.
type Filter struct {
	// Agent matches AgentID exactly.
	Agent string
	// Since drops records older than this.
	Since time.Time
	// Decision matches the decision (allow, ask, deny) exactly.
	Decision string
	// Text matches, case-insensitively, a substring of the command, argv,
	// cwd, resolved paths, reason, decidedBy, run id, session key or node id.
	Text string
}

// Match reports whether r passes the filter.
func (f Filter) Match(r Record) bool {
	if f.Agent != "" && r.AgentID != f.Agent {
		return false
	}
	if !f.Since.IsZero() && r.Time.Before(f.Since) {
		return false
	}
	if f.Decision != "" && !strings.EqualFold(r.Decision, f.Decision) {
		return false
	}
	if f.Text != "" {
		hay := strings.Join(append([]string{
			r.Command, strings.Join(r.Argv, " "), r.Cwd, r.Reason, r.DecidedBy,
			r.RunID, r.SessionKey, r.NodeID, r.Action, r.Actor, r.ReasonCode, r.Change,
		}, r.ResolvedPaths...), "\n")
		if !strings.Contains(strings.ToLower(hay), strings.ToLower(f.Text)) {
			return false
		}
	}
	return true
}

// LineError locates a bad line: the file and 1-based line number.
type LineError struct {
	File string
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// segment is one file of the log, opened while the writers' lock was held so
// that a rotation during a long read neither skips nor repeats lines.
type segment struct {
	name string
	f    *os.File
	size int64
}

// snapshot opens every file of the log at path, oldest first. The caller
// closes them. It holds the writers' lock only while opening, and reads
// without it if the lock cannot be had (a read-only viewer must not be
// stopped by a stuck writer).
func snapshot(path string) ([]segment, error) {
	lk := flock.New(path+".lock", flock.SetFlag(os.O_RDONLY|openFlags))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, _ = lk.TryRLockContext(ctx, time.Millisecond) // best effort, see above
	cancel()
	defer lk.Close() // also unlocks

	names, err := rotatedFiles(path)
	if err != nil {
		return nil, err
	}
	names = append(names, path)
	var segs []segment
	for _, n := range names {
		f, err := os.OpenFile(n, os.O_RDONLY|openFlags, 0)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			closeSegments(segs)
			return nil, fmt.Errorf("open audit log: %w", err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			closeSegments(segs)
			return nil, fmt.Errorf("stat audit log: %w", err)
		}
		// A file an earlier version preallocated may end in a zero tail
		// (see PreallocBytes); the log ends at its data.
		size, err := dataEnd(f, fi.Size())
		if err != nil {
			f.Close()
			closeSegments(segs)
			return nil, fmt.Errorf("read audit log %s: %w", n, err)
		}
		segs = append(segs, segment{name: n, f: f, size: size})
	}
	if len(segs) == 0 {
		return nil, hint.Wrap(fmt.Errorf("read audit log %s: %w", path, os.ErrNotExist), "nothing has been audited on this host yet, or --state-dir points elsewhere")
	}
	return segs, nil
}

func closeSegments(segs []segment) {
	for _, s := range segs {
		s.f.Close()
	}
}

// rotatedFiles lists path.N … path.1 that exist, oldest (highest N) first.
func rotatedFiles(path string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("list audit logs: %w", err)
	}
	base := filepath.Base(path) + "."
	type num struct {
		n    int
		name string
	}
	var ns []num
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), base)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(rest)
		if err != nil || n < 1 || strconv.Itoa(n) != rest {
			continue
		}
		ns = append(ns, num{n, filepath.Join(filepath.Dir(path), e.Name())})
	}
	sort.Slice(ns, func(i, j int) bool { return ns[i].n > ns[j].n })
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.name
	}
	return out, nil
}

// scanLines calls fn for every line (without newline) of the first size
// bytes of r. The final unterminated piece, if any, is passed with
// partial=true. A line longer than MaxLine is passed truncated with
// tooLong=true.
func scanLines(r io.Reader, size int64, fn func(line []byte, lineNo int, partial, tooLong bool) error) error {
	br := bufio.NewReaderSize(io.LimitReader(r, size), 64<<10)
	var long []byte
	n := 0
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long) <= MaxLine {
				long = append(long, chunk...)
			}
			continue
		}
		line := chunk
		if long != nil {
			long = append(long, chunk...)
			line = long
		}
		if len(line) > 0 {
			n++
			partial := err == io.EOF
			tooLong := len(line) > MaxLine
			if tooLong {
				line = line[:MaxLine]
			}
			if ferr := fn(bytes.TrimSuffix(line, []byte("\n")), n, partial, tooLong); ferr != nil {
				return ferr
			}
		}
		long = nil
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Read streams the records of the log at path — every rotated file, oldest
// to newest — that match filter to fn. An error from fn stops the read and
// is returned. Bad lines are skipped so the rest stays searchable; Read then
// returns a *LineError for the first one (run Verify for the full story). An
// unterminated last line of the newest file is an append in progress and is
// skipped silently.
func Read(path string, filter Filter, fn func(Record) error) error {
	segs, err := snapshot(path)
	if err != nil {
		return err
	}
	defer closeSegments(segs)
	key, err := loadChainKey(path)
	if err != nil {
		return err
	}
	var firstBad error
	bad := 0
	for i, s := range segs {
		newest := i == len(segs)-1
		err := scanLines(s.f, s.size, func(line []byte, n int, partial, tooLong bool) error {
			if partial && newest {
				return nil
			}
			var r Record
			var err error
			switch {
			case tooLong:
				err = fmt.Errorf("%w: line longer than %d bytes", ErrCorrupt, MaxLine)
			case partial:
				err = fmt.Errorf("%w: unterminated line", ErrCorrupt)
			default:
				r, _, err = parseLine(line, key)
			}
			if err != nil {
				bad++
				if firstBad == nil {
					firstBad = &LineError{File: s.name, Line: n, Err: err}
				}
				return nil
			}
			if !filter.Match(r) {
				return nil
			}
			return fn(r)
		})
		if err != nil {
			return err
		}
	}
	if bad > 1 {
		return hint.Wrap(fmt.Errorf("%w (and %d more bad lines)", firstBad, bad-1), "run exechost audit verify")
	}
	if firstBad != nil {
		return hint.Wrap(firstBad, "run exechost audit verify")
	}
	return nil
}
