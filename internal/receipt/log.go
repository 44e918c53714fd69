package receipt

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/state"
)

// FileName is the receipt log's name in the state directory. Rotated files
// are FileName.1 (newest) … FileName.<Keep>.
const FileName = "receipts.jsonl"

// LockName is the lock file beside it.
const LockName = "receipts.lock"

// Defaults for Options.
const (
	DefaultMaxBytes = 16 << 20
	DefaultKeep     = 4
	// MaxLine bounds one receipt line; a longer one (a plan naming
	// thousands of executables) is refused rather than written.
	MaxLine = 1 << 20
)

// Options configure a Log.
type Options struct {
	// Dir is the state directory.
	Dir string
	// Signer is the host's identity key.
	Signer Signer
	// Host names the signer ("gateway" or a node id) in receipts that do
	// not name it themselves.
	Host string
	// MaxBytes rotates the file once it would grow past this size
	// (DefaultMaxBytes when 0).
	MaxBytes int64
	// Keep is how many rotated files stay (DefaultKeep when 0); the
	// oldest beyond it is removed, and a KindRotated receipt says so.
	Keep int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Log appends receipts to one host's chain. It is safe for concurrent use,
// and processes sharing a state directory (a gateway and a one-shot
// `exechost run`) take the file's lock for each append and continue the
// chain where the other left it.
type Log struct {
	opts Options
	path string

	mu sync.Mutex
	// lockf is <dir>/receipts.lock: its flock serialises appends across
	// processes (the log file itself is renamed by rotation).
	lockf *os.File
	f     *os.File
	size  int64  // where the file ended after our last append
	seq   uint64 // last receipt's seq
	prev  string // last receipt's digest

	// Write's syncs: the receipts written to f but not yet synced wait in
	// unsynced (each with its callback, which may be nil); one goroutine
	// at a time (syncing) syncs f for all of them without holding mu, so
	// writes go on meanwhile, and reopen and Close sync what still waits
	// before f is closed.
	unsynced []func(error)
	syncing  bool
	syncers  sync.WaitGroup
	syncErr  error // the last sync's outcome, for Append
	// fileMu is held for reading by that goroutine's sync and for
	// writing by whoever closes f: a file is never closed under a sync.
	fileMu sync.RWMutex
}

// Path returns the receipt log's path in dir.
func Path(dir string) string { return filepath.Join(dir, FileName) }

// Open opens (creating, 0600) dir's receipt log and finds the chain's
// head. A torn last line (a crash during a write that was never
// acknowledged) is cut off; a last line that is not a receipt is an
// error, since the chain cannot continue from it.
func Open(opts Options) (*Log, error) {
	if opts.Signer == nil {
		return nil, errors.New("receipt log: no signing key")
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.Keep <= 0 {
		opts.Keep = DefaultKeep
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := state.Ensure(opts.Dir); err != nil {
		return nil, err
	}
	l := &Log{opts: opts, path: Path(opts.Dir)}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Log) open() error {
	lf, err := os.OpenFile(filepath.Join(l.opts.Dir, LockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return hint.Wrap(fmt.Errorf("open receipt log: %w", err), "the state directory must be writable by the host's user")
	}
	l.lockf = lf
	if err := lock(lf); err != nil {
		lf.Close()
		return fmt.Errorf("lock receipt log: %w", err)
	}
	defer unlock(lf)
	return l.refresh()
}

// reopen opens the current file afresh.
func (l *Log) reopen() error {
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return hint.Wrap(fmt.Errorf("open receipt log: %w", err), "the state directory must be writable by the host's user")
	}
	if l.f != nil {
		if len(l.unsynced) > 0 {
			l.syncLocked() // what Write left waiting is in this file
		}
		l.closeFile()
	}
	l.f, l.size = f, -1
	return nil
}

// refresh re-reads the chain's head from the file (another process may
// have appended or rotated) and cuts a torn last line. The caller holds
// the lock.
func (l *Log) refresh() error {
	cur, err := os.Stat(l.path)
	if l.f == nil || err != nil {
		if err := l.reopen(); err != nil {
			return err
		}
	} else if held, err := l.f.Stat(); err != nil || !os.SameFile(cur, held) {
		if err := l.reopen(); err != nil {
			return err
		}
	}
	fi, err := l.f.Stat()
	if err != nil {
		return fmt.Errorf("receipt log: %w", err)
	}
	if fi.Size() == l.size {
		return nil
	}
	last, end, err := lastLine(l.path)
	if err != nil {
		return err
	}
	if end < fi.Size() {
		if err := l.f.Truncate(end); err != nil {
			return fmt.Errorf("receipt log: cut torn line: %w", err)
		}
	}
	l.size = end
	if last == nil {
		// An empty (new or just rotated) file continues the rotated
		// file's chain.
		last, _, err = lastLine(l.path + ".1")
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if last == nil {
		l.seq, l.prev = 0, ""
		return nil
	}
	r, err := Parse(last)
	if err != nil {
		return hint.Wrap(fmt.Errorf("receipt log %s: last line: %w", l.path, err), "move the file aside to start a new chain (a verifier will report the break)")
	}
	l.seq, l.prev = r.Seq, Digest(last)
	return nil
}

// lastLine returns the last complete line of path and the offset where
// complete lines end (before any NUL).
func lastLine(path string) ([]byte, int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && filepath.Base(path) != FileName {
			return nil, 0, err
		}
		return nil, 0, fmt.Errorf("read receipt log: %w", err)
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		// A receipt line holds no NUL: a system crash left these where
		// lines written after the last sync never reached the disk (Write),
		// and nothing from that line on was acknowledged as synced.
		data = data[:bytes.LastIndexByte(data[:i], '\n')+1]
	}
	end := bytes.LastIndexByte(data, '\n') + 1
	body := bytes.TrimSuffix(data[:end], []byte("\n"))
	if len(body) == 0 {
		return nil, int64(end), nil
	}
	return body[bytes.LastIndexByte(body, '\n')+1:], int64(end), nil
}

// Append signs r as the next receipt of the chain (filling Host when
// empty, HostKey, Seq, Prev and Time) and writes it durably: it returns
// after the line is on disk. It returns the receipt's digest.
func (l *Log) Append(r Receipt) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d, err := l.writeLocked(r)
	if err != nil {
		return "", err
	}
	// The sync covers the receipts Write left waiting too.
	l.syncLocked()
	if err := l.syncErr; err != nil {
		l.syncErr = nil
		return "", fmt.Errorf("sync receipt: %w", err)
	}
	return d, nil
}

// Write is Append without waiting for the disk: it returns once the line
// is in the file, where readers (`exechost audit export`) see it and a
// crash of this process can no longer lose it. The fdatasync that makes
// it survive a system crash follows at once on another goroutine, shared
// with every receipt written meanwhile (group commit); synced, when not
// nil, gets its outcome there (possibly with the log locked: it must not
// call the log), and Close waits for it. It is for a run's
// receipt on the path of the run's result, as the audit log's finished
// record (docs/audit-durability.md says what a system crash can lose).
func (l *Log) Write(r Receipt, synced func(error)) (string, error) {
	l.mu.Lock()
	d, err := l.writeLocked(r)
	if err != nil {
		l.mu.Unlock()
		return "", err
	}
	l.unsynced = append(l.unsynced, synced)
	start := !l.syncing
	if start {
		l.syncing = true
		l.syncers.Add(1)
	}
	l.mu.Unlock()
	if start {
		go l.syncLoop()
	}
	return d, nil
}

// syncLoop syncs the file for the receipts Write left waiting, group by
// group, until none waits.
func (l *Log) syncLoop() {
	defer l.syncers.Done()
	for {
		l.mu.Lock()
		if len(l.unsynced) == 0 || l.f == nil {
			l.syncing = false
			l.mu.Unlock()
			return
		}
		waiting, f := l.unsynced, l.f
		l.unsynced = nil
		l.fileMu.RLock() // taken under mu: f cannot be closed before it
		l.mu.Unlock()
		err := datasync(f)
		l.fileMu.RUnlock()
		if err != nil {
			l.mu.Lock()
			l.size = -1 // re-read the head before the next write
			l.mu.Unlock()
		}
		for _, cb := range waiting {
			if cb != nil {
				cb(err)
			}
		}
	}
}

// closeFile closes f once no sync of it is under way. The caller holds mu.
func (l *Log) closeFile() error {
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	return l.f.Close()
}

// syncLocked syncs f and tells every receipt waiting for it the outcome;
// Append's own outcome is left in syncErr. The caller holds mu (Append,
// which waits for the disk anyway, and the closing of f).
func (l *Log) syncLocked() {
	waiting := l.unsynced
	l.unsynced = nil
	err := datasync(l.f)
	if err != nil {
		l.size = -1 // re-read the head before the next write
	}
	l.syncErr = err
	for _, f := range waiting {
		if f != nil {
			f(err)
		}
	}
}

// writeLocked signs and writes r after the chain's head without syncing.
// The caller holds mu.
func (l *Log) writeLocked(r Receipt) (string, error) {
	if l.lockf == nil {
		return "", errors.New("receipt log is closed")
	}
	if err := lock(l.lockf); err != nil {
		return "", fmt.Errorf("lock receipt log: %w", err)
	}
	defer unlock(l.lockf)
	if err := l.refresh(); err != nil {
		return "", err
	}
	if l.size >= l.opts.MaxBytes {
		if err := l.rotate(); err != nil {
			return "", err
		}
	}
	return l.write(r)
}

// write appends r after the head, unsynced. The caller holds mu and the
// lock.
func (l *Log) write(r Receipt) (string, error) {
	if r.Host == "" {
		r.Host = l.opts.Host
	}
	r.Seq, r.Prev = l.seq+1, l.prev
	r.Time = Stamp(l.opts.Now())
	ln, err := Sign(&r, l.opts.Signer)
	if err != nil {
		return "", err
	}
	if len(ln) > MaxLine {
		return "", fmt.Errorf("receipt for run %s is %d bytes, over the %d limit", r.RunID, len(ln), MaxLine)
	}
	ln = append(ln, '\n')
	n, err := l.f.Write(ln)
	if err != nil {
		// A partial line is cut at the next refresh; the head is unchanged.
		l.size = -1
		return "", fmt.Errorf("write receipt: %w", err)
	}
	l.size += int64(n)
	l.seq, l.prev = r.Seq, Digest(ln[:len(ln)-1])
	return l.prev, nil
}

// rotate moves the current file to .1 (shifting older ones up), removes
// the one beyond Keep, and starts the new file with a KindRotated receipt
// naming what was removed. The caller holds mu and the lock.
func (l *Log) rotate() error {
	oldest := l.path + "." + strconv.Itoa(l.opts.Keep)
	removed, rerr := rangeOf(oldest)
	if rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		return rerr
	}
	if rerr == nil {
		if err := os.Remove(oldest); err != nil {
			return fmt.Errorf("rotate receipts: %w", err)
		}
	}
	for i := l.opts.Keep - 1; i >= 1; i-- {
		from := l.path + "." + strconv.Itoa(i)
		if err := os.Rename(from, l.path+"."+strconv.Itoa(i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rotate receipts: %w", err)
		}
	}
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		return fmt.Errorf("rotate receipts: %w", err)
	}
	if err := l.reopen(); err != nil {
		return err
	}
	l.size = 0
	if removed != nil {
		removed.File = filepath.Base(oldest)
		if _, err := l.write(Receipt{Kind: KindRotated, Removed: removed}); err != nil {
			return err
		}
	}
	return nil
}

// rangeOf reads the sequence range of a receipt file.
func rangeOf(path string) (*Removed, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rm *Removed
	err = eachLine(f, func(ln []byte) error {
		r, err := Parse(ln)
		if err != nil {
			return nil // an unreadable line still goes; the range says what we knew
		}
		if rm == nil {
			rm = &Removed{FromSeq: r.Seq}
		}
		rm.ToSeq, rm.LastDigest = r.Seq, Digest(ln)
		return nil
	})
	return rm, err
}

// eachLine calls fn with each non-empty line of r (without the newline).
func eachLine(r io.Reader, fn func([]byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLine+1)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		if err := fn(sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read receipts: %w", err)
	}
	return nil
}

// Files returns the receipt files of dir, oldest first.
func Files(dir string) []string {
	var out []string
	base := Path(dir)
	for i := 64; i >= 1; i-- {
		p := base + "." + strconv.Itoa(i)
		if _, err := os.Lstat(p); err == nil {
			out = append(out, p)
		}
	}
	if _, err := os.Lstat(base); err == nil {
		out = append(out, base)
	}
	return out
}

// Close syncs what Write left waiting and closes the file. A nil Log is
// closed.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	if l.lockf == nil {
		l.mu.Unlock()
		return nil
	}
	var serr error
	if len(l.unsynced) > 0 {
		l.syncLocked()
		if serr = l.syncErr; serr != nil {
			serr = fmt.Errorf("sync receipts: %w", serr)
		}
	}
	err := l.closeFile()
	l.lockf.Close()
	l.f, l.lockf = nil, nil
	l.mu.Unlock()
	l.syncers.Wait()
	return errors.Join(serr, err)
}
