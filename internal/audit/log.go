package audit

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/state"
)

// Options tune a Log. Zero values take the defaults.
type Options struct {
	// MaxBytes rotates the file before an append would grow it past this
	// size (DefaultMaxBytes). Preallocation never grows a file past it
	// either.
	MaxBytes int64
	// Keep is how many rotated files (path.1 … path.Keep) are kept
	// (DefaultKeep).
	Keep int
	// LockTimeout bounds how long Append waits for another process holding
	// the lock (DefaultLockTimeout), so an exec is never held up
	// indefinitely by the audit log.
	LockTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Keep <= 0 {
		o.Keep = DefaultKeep
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	return o
}

// Bounds of the group commit.
const (
	// PreallocBytes is how far ahead of the last line disk blocks are
	// reserved for the file (fallocate with FALLOC_FL_KEEP_SIZE, where the
	// platform has it), so a group commit's fdatasync need not allocate
	// blocks and grow the block map. The file's size is not changed: it
	// always ends at its last line, so `tail -f`, grep and JSON-lines
	// readers see a plain JSON-lines file at every moment (an earlier
	// version wrote a zero tail instead; a file that still has one is cut
	// at its data by the first append, and readers skip it).
	PreallocBytes = 512 << 10
	// MaxSyncWait bounds how long an appender waits, beyond LockTimeout,
	// for the group commit carrying its record; a disk that takes longer
	// to fdatasync fails the append (the exec then goes unaudited, loudly)
	// instead of hanging it.
	MaxSyncWait = 30 * time.Second
	// MaxGroupBytes caps one group commit's write, which bounds how much
	// of the file's end a system crash can leave torn.
	MaxGroupBytes = 128 << 10
	// tornWindow is how far back from the end of the data a freshly
	// opened file is searched for a torn write. Lines never contain NUL,
	// so a NUL inside the data is a page that never reached the disk: its
	// line was never acknowledged (an acknowledged line was fdatasynced,
	// and that sync flushed everything written before it too), and nor was
	// anything written after it.
	tornWindow = PreallocBytes
)

// Log appends records to an audit file. It is safe for concurrent use, and
// several processes may append to the same path at once.
//
// Appends are group-committed: records queue under a short mutex, one
// goroutine at a time (the leader) takes the whole queue, writes it as one
// pwrite under an exclusive lock on path+".lock" (which serialises
// processes: reading the chain head, rotating and writing), releases the
// lock and the mutex, and only then fdatasyncs; records arriving meanwhile
// form the next group. Appenders never hold a lock across the sync.
type Log struct {
	path string
	opts Options
	lock *writeLock

	mu      sync.Mutex // guards queue, leading, idle, closed
	queue   []*pending
	leading bool          // a leader owns the file state below
	idle    chan struct{} // closed when leading turns false
	closed  bool

	// Owned by the current leader (and Close once no leader runs).
	f *os.File // the current file, read-write, written at explicit offsets
	// end is the offset just past the last line of f and head the hash
	// of that line, valid while the byte at end is still zero or EOF
	// (another process appending would have written there).
	end       int64
	head      string
	headValid bool
	// checked is set once f's tail has been checked for a write torn by a
	// system crash (see tornEnd); reset whenever f is (re)opened.
	checked bool
	// groups counts the groups this Log has written (see preallocAfter).
	groups int
	// key keys the chain (chainkey.go); loaded or created on first write.
	key *chainKey
	// reserved is the offset up to which blocks were reserved past f's
	// end (see PreallocBytes); 0 after f is (re)opened.
	reserved int64
}

// pending is one queued record and where its outcome goes.
type pending struct {
	pre  []byte     // the record encoded with an empty prev, see preEncode
	done chan error // buffered: receives exactly one outcome
	// written (buffered) receives the outcome of the write step alone,
	// before the group's fdatasync: what Write waits for.
	written chan error
	// synced, when set, is also told the outcome (Write's callback).
	synced func(error)
}

// Open opens (creating 0600 if needed) the audit log at path, normally
// filepath.Join(stateDir, state.AuditFile), with default options.
func Open(path string) (*Log, error) { return OpenOptions(path, Options{}) }

// OpenOptions is Open with explicit rotation and locking options.
func OpenOptions(path string, opts Options) (*Log, error) {
	l := &Log{
		path: path,
		opts: opts.withDefaults(),
		lock: newWriteLock(path + ".lock"),
	}
	f, err := openLogFile(path)
	if err != nil {
		return nil, err
	}
	l.f = f
	return l, nil
}

// openLogFile opens path read-write (not O_APPEND: lines are written at
// explicit offsets, at the end of the data), creating it 0600,
// and refuses a file owned by another user. A looser mode is tightened.
func openLogFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|openFlags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit log %s: %w (hint: the state directory must exist and be writable by this user)", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat audit log %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("open audit log %s: not a regular file", path)
	}
	if err := state.CheckOwner(fi); err != nil {
		f.Close()
		return nil, fmt.Errorf("open audit log %s: %w", path, err)
	}
	if fi.Mode().Perm() != 0o600 {
		if err := f.Chmod(0o600); err != nil {
			f.Close()
			return nil, fmt.Errorf("chmod audit log %s: %w", path, err)
		}
	}
	return f, nil
}

// Path returns the log's file path.
func (l *Log) Path() string { return l.path }

// Close waits (at most LockTimeout + MaxSyncWait) for queued records to be
// committed, releases the blocks reserved past the file's end (and cuts a
// zero tail an earlier version left), and releases the file and the lock
// handle.
// Appends after Close fail with ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	idle := l.idle
	leading := l.leading
	l.mu.Unlock()
	var errs []error
	if leading {
		t := time.NewTimer(l.opts.LockTimeout + MaxSyncWait)
		select {
		case <-idle:
		case <-t.C:
			errs = append(errs, fmt.Errorf("audit close %s: queued records not committed within %v", l.path, l.opts.LockTimeout+MaxSyncWait))
		}
		t.Stop()
	}
	if len(errs) == 0 {
		if err := l.trimTail(); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, l.f.Close(), l.lock.close())
	return errors.Join(errs...)
}

// trimTail truncates the current file at its data under the lock: that
// frees the blocks reserved past its end, and cuts a zero tail an earlier
// version left. Not fsynced: it changes no line.
func (l *Log) trimTail() error {
	if err := l.lockFile(); err != nil {
		return err
	}
	defer l.lock.unlock()
	if err := l.followRotation(); err != nil {
		return err
	}
	fi, err := l.f.Stat()
	if err != nil {
		return fmt.Errorf("audit close %s: %w", l.path, err)
	}
	de, err := dataEnd(l.f, fi.Size())
	if err != nil {
		return fmt.Errorf("audit close %s: %w", l.path, err)
	}
	if err := l.f.Truncate(de); err != nil {
		return fmt.Errorf("audit close %s: release reserved blocks: %w", l.path, err)
	}
	return nil
}

// Append writes r as one line and returns once it is on disk (fdatasync).
// It fills r.Time when zero; the written line carries prev and hash. It
// never waits longer than Options.LockTimeout for other writers (plus
// MaxSyncWait for the disk); on any failure (a full disk, a lock held too
// long) it returns an error and leaves every earlier line intact — the
// caller must say loudly that the exec went unaudited.
func (l *Log) Append(r Record) error {
	ch, _, err := l.enqueue(r, waitSync, nil)
	if err != nil {
		return err
	}
	wait := l.opts.LockTimeout + MaxSyncWait
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case err := <-ch:
		return err
	case <-t.C:
		return fmt.Errorf("audit append %s: not confirmed on disk within %v (hint: the disk or another exechost process holding the audit lock is stuck)", l.path, wait)
	}
}

// Submit queues r like Append but does not wait: the returned channel
// receives exactly one value, nil once the record is on disk or the error
// that kept it off. Close waits for submitted records.
func (l *Log) Submit(r Record) <-chan error {
	ch, _, err := l.enqueue(r, waitNone, nil)
	if err != nil {
		failed := make(chan error, 1)
		failed <- err
		return failed
	}
	return ch
}

// Write appends r and returns once its line is in the file: readers see
// it, and a crash of this process (kill -9, panic) can no longer lose it.
// It does not wait for the fdatasync that makes the line survive a system
// crash; that sync follows at once (shared with whatever queued meanwhile),
// synced (when not nil) is called with its outcome from the goroutine that
// ran it, and Close waits for it. It is for the "finished" record of a run
// whose decision record Append already made durable, so the caller's
// result does not wait for a disk flush (docs/audit-durability.md says
// what a system crash can then lose). It never waits longer than Append
// would.
func (l *Log) Write(r Record, synced func(error)) error {
	_, written, err := l.enqueue(r, waitWrite, synced)
	if err != nil {
		return err
	}
	wait := l.opts.LockTimeout + MaxSyncWait
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case err := <-written:
		return err
	case <-t.C:
		return fmt.Errorf("audit append %s: not written within %v (hint: the disk or another exechost process holding the audit lock is stuck)", l.path, wait)
	}
}

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
	pre, err := preEncode(r)
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
		return fmt.Errorf("audit append %s: %w after %v (hint: another exechost process is stuck writing the audit log)", l.path, ErrLockTimeout, l.opts.LockTimeout)
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
	if err := syncData(l.f); err != nil {
		l.headValid = false
		return fmt.Errorf("audit append %s: sync: %w (hint: is the disk failing or full? the record may not be on disk)", l.path, err)
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
		return fmt.Errorf("audit append %s: %w (hint: is the disk full? the record was not written)", l.path, err)
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
	return fmt.Errorf("audit append %s: %w (hint: is the disk full? the record was not written)", l.path, err)
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

// syncData is datasync, replaceable by tests that count or stall syncs.
var syncData = datasync

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

// dataEnd returns the offset just past the last non-zero byte among the
// first size bytes of r: the end of the log's data, before the
// preallocated zero tail. Lines never contain a NUL byte (JSON escapes it),
// so the tail cannot be mistaken for data.
func dataEnd(r io.ReaderAt, size int64) (int64, error) {
	const chunk = 64 << 10
	var buf []byte
	for end := size; end > 0; {
		n := min(int64(chunk), end)
		off := end - n
		if buf == nil {
			buf = make([]byte, chunk)
		}
		b := buf[:n]
		if _, err := r.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if i := lastNonZero(b); i >= 0 {
			return off + int64(i) + 1, nil
		}
		end = off
	}
	return 0, nil
}

// lastNonZero returns the index of the last non-zero byte of b, or -1,
// comparing eight bytes at a time across the zero run.
func lastNonZero(b []byte) int {
	i := len(b)
	for i >= 8 && binary.LittleEndian.Uint64(b[i-8:i]) == 0 {
		i -= 8
	}
	for i > 0 {
		if b[i-1] != 0 {
			return i - 1
		}
		i--
	}
	return -1
}

// tornEnd returns where the data of a file ending at de stops being
// trustworthy: at the first NUL byte within tornWindow of de (a page a
// system crash lost; see tornWindow), else de. The caller cuts the file
// back to the line boundary before it.
func tornEnd(r io.ReaderAt, de int64) (int64, error) {
	from := max(0, de-tornWindow)
	buf := make([]byte, de-from)
	if _, err := r.ReadAt(buf, from); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		return from + int64(i), nil
	}
	return de, nil
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

// chainHead returns the end of the current file's data and the hash the
// next line must carry as prev. The cached head stays valid while the byte
// at its end is still zero (or past EOF): any other process appending
// writes there first. Otherwise the file is read back: an unterminated last
// line is the remains of an interrupted append (never acknowledged), so it
// is cut off, and an empty file continues the chain of the newest rotated
// file.
func (l *Log) chainHead() (end int64, prev string, err error) {
	if l.headValid {
		var b [1]byte
		n, err := l.f.ReadAt(b[:], l.end)
		if (n == 0 && errors.Is(err, io.EOF)) || (n == 1 && b[0] == 0) {
			return l.end, l.head, nil
		}
		l.headValid = false
	}
	fi, err := l.f.Stat()
	if err != nil {
		return 0, "", fmt.Errorf("audit append %s: stat: %w", l.path, err)
	}
	de, err := dataEnd(l.f, fi.Size())
	if err != nil {
		return 0, "", fmt.Errorf("audit append %s: find end of data: %w", l.path, err)
	}
	full := fi.Size()
	if !l.checked {
		if de, err = tornEnd(l.f, de); err != nil {
			return 0, "", fmt.Errorf("audit append %s: check for a torn write: %w", l.path, err)
		}
		l.checked = true
	}
	last, end, err := lastLine(l.f, de)
	if err != nil {
		return 0, "", fmt.Errorf("audit append %s: read chain head: %w", l.path, err)
	}
	if end != full {
		// Truncate (not zero) so a follower sees the file shrink past its
		// offset and rereads from the cut. This also cuts a zero tail an
		// earlier version preallocated, so the file ends at its last line.
		if err := l.f.Truncate(end); err != nil {
			return 0, "", fmt.Errorf("audit append %s: cut interrupted line: %w", l.path, err)
		}
	}
	if last != nil {
		return end, chainHash(last), nil
	}
	prev, err = lastHashOf(rotatedName(l.path, 1))
	if err != nil {
		return 0, "", fmt.Errorf("audit append %s: read chain head of rotated file: %w", l.path, err)
	}
	return end, prev, nil
}

// lastHashOf returns the chain hash of the last complete line of the file
// at path, or "" when it does not exist or holds no complete line.
func lastHashOf(path string) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	last, _, err := lastLine(f, fi.Size())
	if err != nil || last == nil {
		return "", err
	}
	return chainHash(last), nil
}

// lastLine returns the last newline-terminated line of the first size bytes
// of r (without its newline; nil if there is none) and the offset just past
// that line's newline, which is less than size when an unterminated partial
// line follows.
func lastLine(r io.ReaderAt, size int64) (line []byte, end int64, err error) {
	const chunk = 8 << 10
	// Find the last newline.
	end = -1
	var buf []byte // bytes from some offset up to size
	off := size
	for off > 0 && end < 0 {
		n := min(int64(chunk), off)
		off -= n
		b := make([]byte, n)
		if _, err := r.ReadAt(b, off); err != nil {
			return nil, 0, err
		}
		buf = append(b, buf...)
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			end = off + int64(i) + 1
		}
		if size-off > MaxLine {
			return nil, 0, fmt.Errorf("%w: last line longer than %d bytes", ErrCorrupt, MaxLine)
		}
	}
	if end < 0 {
		return nil, 0, nil
	}
	buf = buf[:end-off]
	// Find the newline before it, reading further back if needed.
	for {
		if i := bytes.LastIndexByte(buf[:len(buf)-1], '\n'); i >= 0 {
			return buf[i+1 : len(buf)-1], end, nil
		}
		if off == 0 {
			return buf[:len(buf)-1], end, nil
		}
		if end-off > MaxLine {
			return nil, 0, fmt.Errorf("%w: last line longer than %d bytes", ErrCorrupt, MaxLine)
		}
		n := min(int64(chunk), off)
		off -= n
		b := make([]byte, n)
		if _, err := r.ReadAt(b, off); err != nil {
			return nil, 0, err
		}
		buf = append(b, buf...)
	}
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
