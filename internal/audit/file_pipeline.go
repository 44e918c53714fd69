package audit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/exechost/exechost/internal/hint"
)

// The file pipeline: the group commit that turns queued records into one
// pwrite and one fdatasync (enqueue, lead, commit), the undo of a failed
// write, block reservation ahead of the data, and rotation. Encoding a line
// is line.go; reading the tail back after a crash is repair.go.

// enqueue validates and pre-encodes r on the caller's goroutine (so
// encoding runs in parallel), queues it and makes sure a leader will commit
// it. When no leader is running, the caller does what it would wait for
// anyway (one group, which holds its record): Append the whole commit,
// Write the group's pwrite, leaving the sync to a goroutine; so a lone
// exec's records cost no goroutine hand-off. Otherwise a new goroutine
// leads.
func (l *Log) enqueue(r Record, mode waitMode, synced func(error)) (done, written <-chan error, err error) {
	switch r.Event {
	case EventDecision, EventFinished, EventDenied:
	default:
		return nil, nil, fmt.Errorf("audit append: %w: unknown event %q", ErrInvalid, r.Event)
	}
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	r.Time = r.Time.UTC()
	pre, err := preEncode(bound(r))
	if err != nil {
		return nil, nil, err
	}
	p := &pending{pre: pre, done: make(chan error, 1), written: make(chan error, 1), synced: synced}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, nil, fmt.Errorf("audit append %s: %w", l.path, ErrClosed)
	}
	l.queue = append(l.queue, p)
	lead := !l.leading
	if lead {
		l.leading = true
		l.idle = make(chan struct{})
	}
	l.mu.Unlock()
	switch {
	case lead && mode == waitSync:
		l.commitNext() // the queue holds at least p
		l.handOff()
	case lead && mode == waitWrite:
		// The caller writes the group inline (it waits for that anyway)
		// and leaves the sync, and any groups queued meanwhile, to a
		// goroutine that stays the leader.
		batch := l.nextBatch() // holds at least p
		if err := l.writeGroup(batch); err != nil {
			l.finish(batch, err)
			l.handOff()
			break
		}
		go func() {
			l.finish(batch, l.syncGroup())
			l.lead()
		}()
	case lead:
		go l.lead()
	}
	return p.done, p.written, nil
}

// waitMode is what an enqueue's caller waits for, which decides whether it
// can do the leader's work itself.
type waitMode int

const (
	waitNone  waitMode = iota // Submit: nothing; a goroutine leads
	waitWrite                 // Write: the group's pwrite, not its sync
	waitSync                  // Append: the sync
)

// lead commits queued groups until the queue is empty. Only one leader runs
// at a time; it alone touches the file state.
func (l *Log) lead() {
	for l.commitNext() {
	}
}

// commitNext commits the next group, if any, and reports whether the
// caller is still the leader (false: the queue was empty and leadership
// ended).
func (l *Log) commitNext() bool {
	batch := l.nextBatch()
	if batch == nil {
		return false
	}
	l.finish(batch, l.commit(batch))
	return true
}

// nextBatch takes the next group off the queue (at most MaxGroupBytes, at
// least one record); on an empty queue it ends leadership and returns nil.
func (l *Log) nextBatch() []*pending {
	l.mu.Lock()
	defer l.mu.Unlock()
	batch := l.queue
	size := 0
	for i, p := range batch {
		if size += len(p.pre); size > MaxGroupBytes && i > 0 {
			batch = batch[:i]
			break
		}
	}
	if len(batch) == len(l.queue) {
		l.queue = nil
	} else {
		l.queue = l.queue[len(batch):]
	}
	if len(batch) == 0 {
		l.leading = false
		close(l.idle)
		return nil
	}
	return batch
}

// finish tells each record of a committed group its outcome.
func (l *Log) finish(batch []*pending, err error) {
	for _, p := range batch {
		p.done <- err
		if p.synced != nil {
			p.synced(err)
		}
	}
}

// handOff ends an inline leader's turn: leadership ends if nothing queued
// meanwhile, else passes to a new goroutine so the caller can return.
func (l *Log) handOff() {
	l.mu.Lock()
	if len(l.queue) == 0 {
		l.leading = false
		close(l.idle)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	go l.lead()
}

// lockFile takes the cross-process lock, waiting at most LockTimeout.
func (l *Log) lockFile() error {
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.LockTimeout)
	defer cancel()
	ok, err := l.lock.lock(ctx, time.Millisecond)
	if err != nil {
		return fmt.Errorf("audit append %s: lock: %w", l.path, err)
	}
	if !ok {
		return hint.Wrap(fmt.Errorf("audit append %s: %w after %v", l.path, ErrLockTimeout, l.opts.LockTimeout), "another exechost process is stuck writing the audit log")
	}
	return nil
}

// commit writes one group under the cross-process lock, releases it,
// tells each record's writer (pending.written), and then makes the group
// durable with one fdatasync.
func (l *Log) commit(batch []*pending) error {
	if err := l.writeGroup(batch); err != nil {
		return err
	}
	return l.syncGroup()
}

// writeGroup is commit's first step: the group's pwrite under the lock,
// after which each record's writer is told.
func (l *Log) writeGroup(batch []*pending) error {
	err := l.lockFile()
	if err == nil {
		err = l.writeLocked(batch)
		_ = l.lock.unlock() // closing the descriptor (Close) releases it too
	}
	for _, p := range batch {
		p.written <- err
	}
	return err
}

// syncGroup is commit's second step: one fdatasync for everything written.
func (l *Log) syncGroup() error {
	// Another process may chain onto these lines before they are synced;
	// its own fdatasync of the same file flushes them too, and if this
	// sync fails the lines may still reach the disk: the log can then hold
	// a record whose append reported failure (the exec did not run), never
	// lack one that reported success.
	if err := l.opts.syncData(l.f); err != nil {
		l.headValid = false
		return hint.Wrap(fmt.Errorf("audit append %s: sync: %w", l.path, err), "is the disk failing or full? the record may not be on disk")
	}
	return nil
}

// writeLocked chains and writes the group at the end of the current file,
// rotating first when a line would grow the file past MaxBytes. The caller
// holds the lock.
func (l *Log) writeLocked(batch []*pending) error {
	if err := l.followRotation(); err != nil {
		return err
	}
	end, prev, err := l.chainHead()
	if err != nil {
		return err
	}
	if l.key == nil {
		if l.key, err = openChainKey(l.path, prev); err != nil {
			return err
		}
	}
	start := end
	var buf []byte
	for _, p := range batch {
		line, hash := seal(l.key, p.pre, prev)
		if end > 0 && end+int64(len(line)) > l.opts.MaxBytes {
			if err := l.writeAt(buf, start); err != nil {
				return err
			}
			l.end, l.head, l.headValid = end, prev, true
			if err := l.rotate(end, prev); err != nil {
				return err
			}
			start, end, buf = 0, 0, buf[:0]
		}
		buf = append(buf, line...)
		end += int64(len(line))
		prev = hash
	}
	if err := l.writeAt(buf, start); err != nil {
		return err
	}
	l.end, l.head, l.headValid = end, prev, true
	return nil
}

// writeAt writes buf at off, the end of the file's data, into blocks
// reserved first where it can (see reserve). On failure it puts the file
// back as it was, so a partial line never follows the good ones.
func (l *Log) writeAt(buf []byte, off int64) error {
	if len(buf) == 0 {
		return nil
	}
	fi, err := l.f.Stat()
	if err != nil {
		l.headValid = false
		return hint.Wrap(fmt.Errorf("audit append %s: %w", l.path, err), "is the disk full? the record was not written")
	}
	size := fi.Size()
	l.reserve(size, off+int64(len(buf)))
	_, err = l.f.WriteAt(buf, off)
	l.groups++
	if err == nil {
		return nil
	}
	l.headValid = false
	if uerr := l.unwrite(off, off+int64(len(buf)), size); uerr != nil {
		err = errors.Join(err, fmt.Errorf("undo partial write: %w", uerr))
	}
	return hint.Wrap(fmt.Errorf("audit append %s: %w", l.path, err), "is the disk full? the record was not written")
}

// unwrite undoes a failed write of [from, to) to a file that was size
// bytes long (File.WriteAt does not say how much of a failed write landed):
// what lay past size is cut off, what lay inside size (a zero tail an
// earlier version left) is zeroed again. When zeroing fails too (the disk that refused the line may
// refuse the zeros) and bytes remain past from, the file is cut at from.
func (l *Log) unwrite(from, to, size int64) error {
	if to > size {
		if err := l.f.Truncate(max(from, size)); err != nil {
			return err
		}
		to = size
	}
	if from >= to || writeZeros(l.f, from, to) == nil {
		return nil
	}
	fi, err := l.f.Stat()
	if err != nil {
		return err
	}
	if de, err := dataEnd(l.f, fi.Size()); err == nil && de <= from {
		return nil // the zeros that matter landed
	}
	return l.f.Truncate(from)
}

// preallocAfter is how many groups a Log writes before it reserves
// blocks: a one-shot `exechost run` (a decision and a finished record)
// should not reserve half a megabyte.
const preallocAfter = 2

// reserve makes sure, once this Log is past preallocAfter groups, that
// blocks are reserved up to need (a file of size bytes): when need lies
// past what was reserved, it reserves up to the next PreallocBytes
// boundary (capped at MaxBytes) without changing the file's size. A
// failure (a full disk, a file system without the call) only means the
// write allocates its own blocks, as it would without reserving.
func (l *Log) reserve(size, need int64) {
	if l.groups < preallocAfter || need <= l.reserved {
		return
	}
	target := max(min((need+PreallocBytes-1)/PreallocBytes*PreallocBytes, l.opts.MaxBytes), need)
	if target > size && reserveBlocks(l.f, size, target-size) == nil {
		l.reserved = target
	}
}

// zeros is the source of undo writes.
var zeros [64 << 10]byte

// writeZeros writes zero bytes over [from, to) of f.
func writeZeros(f *os.File, from, to int64) error {
	for off := from; off < to; {
		n := min(to-off, int64(len(zeros)))
		k, err := f.WriteAt(zeros[:n], off)
		off += int64(k)
		if err != nil {
			return err
		}
	}
	return nil
}

// followRotation reopens the path when another process rotated (or someone
// removed) the file this Log holds open.
func (l *Log) followRotation() error {
	cur, err := l.f.Stat()
	if err != nil {
		return fmt.Errorf("audit append %s: stat: %w", l.path, err)
	}
	fi, err := os.Lstat(l.path)
	if err == nil && os.SameFile(cur, fi) {
		return nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("audit append %s: %w", l.path, err)
	}
	f, err := openLogFile(l.path)
	if err != nil {
		return err
	}
	l.f.Close()
	l.f = f
	l.headValid, l.checked, l.reserved = false, false, 0
	return nil
}

// rotatedName returns the name of the n-th rotated file (n ≥ 1).
func rotatedName(path string, n int) string { return path + "." + strconv.Itoa(n) }

// rotate cuts the current file at end (releasing its reserved blocks) and makes it
// durable, shifts path.N-1 → path.N … path → path.1 and opens a fresh path,
// whose first line will carry head as prev. The caller holds the lock.
func (l *Log) rotate(end int64, head string) error {
	if err := l.f.Truncate(end); err != nil {
		return fmt.Errorf("audit rotate %s: release reserved blocks: %w", l.path, err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("audit rotate %s: sync: %w", l.path, err)
	}
	keep := l.opts.Keep
	if err := l.retain(rotatedName(l.path, keep)); err != nil { // retain.go
		return err
	}
	if err := os.Remove(rotatedName(l.path, keep)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("audit rotate %s: %w", l.path, err)
	}
	for i := keep - 1; i >= 1; i-- {
		err := os.Rename(rotatedName(l.path, i), rotatedName(l.path, i+1))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("audit rotate %s: %w", l.path, err)
		}
	}
	if err := os.Rename(l.path, rotatedName(l.path, 1)); err != nil {
		return fmt.Errorf("audit rotate %s: %w", l.path, err)
	}
	f, err := openLogFile(l.path)
	if err != nil {
		return fmt.Errorf("audit rotate: %w", err)
	}
	l.f.Close()
	l.f = f
	l.end, l.head, l.headValid, l.checked, l.reserved = 0, head, true, true, 0
	if err := syncDir(filepath.Dir(l.path)); err != nil {
		l.headValid = false
		return fmt.Errorf("audit rotate %s: sync directory: %w", l.path, err)
	}
	return nil
}
