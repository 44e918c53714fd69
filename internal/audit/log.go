package audit

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/hint"
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

	// syncData replaces fdatasync for tests in this package that count or
	// stall syncs; nil is datasync. Unexported: no caller outside can
	// weaken a commit's durability.
	syncData func(*os.File) error
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
	if o.syncData == nil {
		o.syncData = datasync
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
	// beforeClose run at the start of Close, while appends still work
	// (BeforeClose).
	beforeClose []func()

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
		return nil, hint.Wrap(fmt.Errorf("open audit log %s: %w", path, err), "the state directory must exist and be writable by this user")
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
	hooks := l.beforeClose
	l.beforeClose = nil
	l.mu.Unlock()
	for _, f := range hooks {
		f()
	}
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

// BeforeClose registers f to run at the start of Close, while appends
// still work: a writer that holds records back (an Aggregator's counts)
// writes them there.
func (l *Log) BeforeClose(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.beforeClose = append(l.beforeClose, f)
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
		return hint.Wrap(fmt.Errorf("audit append %s: not confirmed on disk within %v", l.path, wait), "the disk or another exechost process holding the audit lock is stuck")
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
		return hint.Wrap(fmt.Errorf("audit append %s: not written within %v", l.path, wait), "the disk or another exechost process holding the audit lock is stuck")
	}
}
