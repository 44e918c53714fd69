package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/gofrs/flock"

	"github.com/exechost/exechost/internal/state"
)

// Options tune a Log. Zero values take the defaults.
type Options struct {
	// MaxBytes rotates the file before an append would grow it past this
	// size (DefaultMaxBytes).
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

// Log appends records to an audit file. It is safe for concurrent use, and
// several processes may append to the same path at once: every append
// takes an exclusive lock on path+".lock" around reading the chain head,
// rotating and writing.
type Log struct {
	path string
	opts Options
	lock *flock.Flock

	mu     sync.Mutex // serialises goroutines; the flock serialises processes
	f      *os.File   // the current file, O_APPEND
	closed bool
	// head caches the chain head (hash of the last line) for a file of
	// headSize bytes, so an uncontended append does not re-read the file.
	head      string
	headSize  int64
	headValid bool
}

// Open opens (creating 0600 if needed) the audit log at path, normally
// filepath.Join(stateDir, state.AuditFile), with default options.
func Open(path string) (*Log, error) { return OpenOptions(path, Options{}) }

// OpenOptions is Open with explicit rotation and locking options.
func OpenOptions(path string, opts Options) (*Log, error) {
	l := &Log{
		path: path,
		opts: opts.withDefaults(),
		lock: flock.New(path+".lock", flock.SetFlag(os.O_CREATE|os.O_RDWR|openFlags), flock.SetPermissions(0o600)),
	}
	f, err := openAppend(path)
	if err != nil {
		return nil, err
	}
	l.f = f
	return l, nil
}

// openAppend opens path for appending, creating it 0600, and refuses a file
// owned by another user. A looser mode is tightened.
func openAppend(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE|openFlags, 0o600)
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

// Close releases the file and the lock handle. Appends after Close fail
// with ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	return errors.Join(l.f.Close(), l.lock.Close())
}

// Append writes r as one line and fsyncs it before returning. It fills
// r.Time when zero and always sets r.Prev and r.Hash. It never waits longer
// than Options.LockTimeout for other writers; on any failure (a full disk,
// a lock held too long) it returns an error and leaves every earlier line
// intact — the caller must say loudly that the exec went unaudited.
func (l *Log) Append(r Record) error {
	switch r.Event {
	case EventDecision, EventFinished, EventDenied:
	default:
		return fmt.Errorf("audit append: %w: unknown event %q", ErrInvalid, r.Event)
	}
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	r.Time = r.Time.UTC()

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return fmt.Errorf("audit append %s: %w", l.path, ErrClosed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.LockTimeout)
	defer cancel()
	ok, err := l.lock.TryLockContext(ctx, time.Millisecond)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("audit append %s: lock: %w", l.path, err)
	}
	if !ok {
		return fmt.Errorf("audit append %s: %w after %v (hint: another exechost process is stuck writing the audit log)", l.path, ErrLockTimeout, l.opts.LockTimeout)
	}
	defer l.lock.Unlock()

	if err := l.followRotation(); err != nil {
		return err
	}
	size, prev, err := l.chainHead()
	if err != nil {
		return err
	}
	r.Prev = prev
	line, hash, err := encodeLine(r)
	if err != nil {
		return err
	}
	if size > 0 && size+int64(len(line)) > l.opts.MaxBytes {
		if err := l.rotate(); err != nil {
			return err
		}
		size = 0
	}
	if err := l.write(line, size); err != nil {
		return err
	}
	l.head, l.headSize, l.headValid = hash, size+int64(len(line)), true
	return nil
}

// write appends line to a file of size bytes and fsyncs. On failure it cuts
// the file back to size so a partial line never follows the good ones.
func (l *Log) write(line []byte, size int64) error {
	_, err := l.f.Write(line)
	if err == nil {
		err = l.f.Sync()
	}
	if err == nil {
		return nil
	}
	l.headValid = false
	if terr := l.f.Truncate(size); terr != nil {
		err = errors.Join(err, fmt.Errorf("undo partial write: %w", terr))
	}
	return fmt.Errorf("audit append %s: %w (hint: is the disk full? the record was not written)", l.path, err)
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
	f, err := openAppend(l.path)
	if err != nil {
		return err
	}
	l.f.Close()
	l.f = f
	l.headValid = false
	return nil
}

// chainHead returns the current file's size and the hash the next line
// must carry as prev. An unterminated last line is the remains of an
// interrupted append (never acknowledged), so it is cut off. An empty file
// continues the chain of the newest rotated file.
func (l *Log) chainHead() (size int64, prev string, err error) {
	fi, err := l.f.Stat()
	if err != nil {
		return 0, "", fmt.Errorf("audit append %s: stat: %w", l.path, err)
	}
	size = fi.Size()
	if l.headValid && size == l.headSize {
		return size, l.head, nil
	}
	last, end, err := lastLine(l.f, size)
	if err != nil {
		return 0, "", fmt.Errorf("audit append %s: read chain head: %w", l.path, err)
	}
	if end != size {
		if err := l.f.Truncate(end); err != nil {
			return 0, "", fmt.Errorf("audit append %s: cut interrupted line: %w", l.path, err)
		}
		size = end
	}
	if last != nil {
		return size, chainHash(last), nil
	}
	prev, err = lastHashOf(rotatedName(l.path, 1))
	if err != nil {
		return 0, "", fmt.Errorf("audit append %s: read chain head of rotated file: %w", l.path, err)
	}
	return size, prev, nil
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

// rotate shifts path.N-1 → path.N … path → path.1 and opens a fresh path.
// The caller holds the lock and has already read the chain head, which the
// first line of the new file carries.
func (l *Log) rotate() error {
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
	f, err := openAppend(l.path)
	if err != nil {
		return fmt.Errorf("audit rotate: %w", err)
	}
	l.f.Close()
	l.f = f
	l.headValid = false
	if err := syncDir(filepath.Dir(l.path)); err != nil {
		return fmt.Errorf("audit rotate %s: sync directory: %w", l.path, err)
	}
	return nil
}
