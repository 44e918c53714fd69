package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Follow calls fn for every record matching filter that is appended to the
// log at path after Follow starts, until ctx is done or fn returns an
// error. It polls every interval (a second when zero) and follows
// rotation: the rest of a rotated file, then any files rotated since, are
// read before the new one. Bad lines are skipped.
func Follow(ctx context.Context, path string, filter Filter, interval time.Duration, fn func(Record) error) error {
	fw, err := NewFollower(path, filter)
	if err != nil {
		return err
	}
	defer fw.Close()
	return fw.Run(ctx, interval, fn)
}

// Follower is Follow in two steps: NewFollower fixes the starting point
// (the end of the log), Run reports what is appended after it. `audit tail
// --follow` creates the Follower before reading the existing records so
// that nothing appended in between is lost.
type Follower struct {
	path string
	fw   follower
}

// NewFollower positions a follower at the current end of the log at path
// (which need not exist yet).
func NewFollower(path string, filter Filter) (*Follower, error) {
	f := &Follower{path: path, fw: follower{filter: filter, path: path}}
	if err := f.fw.openAtEnd(path); err != nil {
		return nil, err
	}
	return f, nil
}

// Run calls fn for every matching record appended since NewFollower, polling
// every interval (a second when zero), until ctx is done or fn fails.
func (f *Follower) Run(ctx context.Context, interval time.Duration, fn func(Record) error) error {
	if interval <= 0 {
		interval = time.Second
	}
	f.fw.fn = fn
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := f.fw.drain(); err != nil {
			return err
		}
		if err := f.fw.checkRotation(f.path); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Close releases the file being followed.
func (f *Follower) Close() error {
	f.fw.close()
	return nil
}

// follower is Follow's state: the file being read and how far.
type follower struct {
	filter  Filter
	fn      func(Record) error
	f       *os.File
	off     int64
	pending []byte // an unterminated tail seen so far
	// path and key: the log's chain key, loaded once it exists.
	path string
	key  *chainKey
}

func (fw *follower) close() {
	if fw.f != nil {
		fw.f.Close()
		fw.f = nil
	}
}

// openAtEnd opens path positioned just past its last complete line. A
// missing file is not an error: Follow waits for it.
func (fw *follower) openAtEnd(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|openFlags, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("follow audit log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("follow audit log: %w", err)
	}
	de, err := dataEnd(f, fi.Size())
	if err != nil {
		f.Close()
		return fmt.Errorf("follow audit log: %w", err)
	}
	_, end, err := lastLine(f, de)
	if err != nil {
		f.Close()
		return fmt.Errorf("follow audit log: %w", err)
	}
	fw.f, fw.off = f, end
	return nil
}

// drain reports every complete line added to the current file since the
// last call.
func (fw *follower) drain() error {
	if fw.f == nil {
		return nil
	}
	fi, err := fw.f.Stat()
	if err != nil {
		return fmt.Errorf("follow audit log: %w", err)
	}
	if fi.Size() < fw.off { // cut back (an interrupted append was removed)
		fw.off, fw.pending = fi.Size(), nil
	}
	// Read up to the end of the data, not into a zero tail an earlier
	// version preallocated (the next append cuts it).
	end, err := dataEnd(fw.f, fi.Size())
	if err != nil {
		return fmt.Errorf("follow audit log: %w", err)
	}
	for fw.off < end {
		buf := make([]byte, min(end-fw.off, 1<<20))
		k, err := fw.f.ReadAt(buf, fw.off)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("follow audit log: %w", err)
		}
		if k == 0 {
			break
		}
		fw.off += int64(k)
		fw.pending = append(fw.pending, buf[:k]...)
		for {
			i := bytes.IndexByte(fw.pending, '\n')
			if i < 0 {
				break
			}
			line := fw.pending[:i]
			fw.pending = fw.pending[i+1:]
			if fw.key == nil {
				fw.key, _ = loadChainKey(fw.path) // none yet: plain lines only
			}
			if r, _, err := parseLine(line, fw.key); err == nil && fw.filter.Match(r) {
				if err := fw.fn(r); err != nil {
					return err
				}
			}
		}
		if len(fw.pending) > MaxLine {
			fw.pending = nil
		}
	}
	return nil
}

// checkRotation switches to the new file when path no longer names the
// file being read, first reading files rotated in between (several
// rotations may happen between two polls). The files are opened under the
// writers' lock (snapshot), so names shifting during a rotation can neither
// skip a file nor repeat one; the file being read is found by identity, not
// by name.
func (fw *follower) checkRotation(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return nil // not there (yet): keep polling
	}
	var cur os.FileInfo
	if fw.f != nil {
		if cur, err = fw.f.Stat(); err != nil {
			return fmt.Errorf("follow audit log: %w", err)
		}
		if os.SameFile(cur, fi) {
			return nil
		}
		if err := fw.drain(); err != nil { // lines written just before rotation
			return err
		}
	}
	segs, err := snapshot(path)
	if err != nil {
		return nil // nothing there (yet): keep polling
	}
	// Read the files newer than the one just finished, oldest first (all
	// of them if it was pruned already); with no file before, only the
	// newest one: Follow reports what is appended after it starts.
	start := len(segs) - 1
	if cur != nil {
		start = 0
		for i, sg := range segs {
			if sfi, err := sg.f.Stat(); err == nil && os.SameFile(cur, sfi) {
				start = i + 1
			}
		}
	}
	closeSegments(segs[:start])
	rest := segs[start:]
	for i, sg := range rest {
		fw.close()
		fw.f, fw.off, fw.pending = sg.f, 0, nil
		if err := fw.drain(); err != nil {
			closeSegments(rest[i+1:])
			return err
		}
	}
	return nil
}
