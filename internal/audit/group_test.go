package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/testproc"
)

// TestGroupCommitSharesOneSync stalls the first fdatasync until every other
// appender has queued its record, which they can only do if no lock is held
// across the sync; the second group must then carry them all with one more
// sync.
func TestGroupCommitSharesOneSync(t *testing.T) {
	path := logPath(t)
	const n = 16
	var (
		mu    sync.Mutex
		syncs int
		armed bool // counts from after the warm-up append
		l     *Log
	)
	stallErr := make(chan error, 1)
	stall := func(f *os.File) error {
		mu.Lock()
		if armed {
			syncs++
		}
		first := armed && syncs == 1
		mu.Unlock()
		if first {
			stallErr <- waitQueued(l, n-1, 30*time.Second)
		}
		return datasync(f)
	}
	l = openLog(t, path, Options{syncData: stall})
	errs := make(chan error, n)
	if err := l.Append(rec("w", 0)); err != nil { // warm: preallocates
		t.Fatal(err)
	}
	mu.Lock()
	armed = true
	mu.Unlock()

	go func() { errs <- l.Append(rec("w", 1)) }()
	// Wait until the first append is inside its sync before starting the
	// rest, so the test does not depend on scheduling.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		s := syncs
		mu.Unlock()
		if s > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first append never reached its sync")
		}
	}
	for i := 2; i <= n; i++ {
		go func() { errs <- l.Append(rec("w", i)) }()
	}
	if err := testproc.Recv(t, stallErr, "the stalled append's result"); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := testproc.Recv(t, errs, "the queued appends' results"); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	got := syncs
	mu.Unlock()
	if got != 2 {
		t.Errorf("%d appends took %d fdatasyncs, want 2 (one stalled, then one group)", n, got)
	}
	mustVerify(t, path, n+1)
}

// waitQueued polls until l's queue holds want records.
func waitQueued(l *Log, want int, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		q := len(l.queue)
		l.mu.Unlock()
		if q >= want {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	return errors.New("appenders did not queue while a sync was in progress")
}

// TestFileIsJSONLinesAtEveryMoment checks the file's shape while a Log
// has it open: after every append, before and after blocks are reserved,
// the file is exactly its lines (no zero tail), so `tail -f`, grep and
// JSON-lines readers work on it; past preallocAfter groups, blocks are
// reserved beyond its end (on Linux) without changing its size; Close
// releases them.
func TestFileIsJSONLinesAtEveryMoment(t *testing.T) {
	path := logPath(t)
	l, err := OpenOptions(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := rec("a", 0)
	r.Time = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	first, _, _ := encodeLine(r)
	// The first line's prev is empty; every later one carries a 64-digit
	// hash.
	linesLen := func(n int) int64 { return int64(n*len(first) + (n-1)*64) }
	const n = preallocAfter + 3
	for i := range n {
		if err := l.Append(r); err != nil {
			t.Fatal(err)
		}
		mustBeJSONLines(t, path, linesLen(i+1))
	}
	if runtime.GOOS == "linux" {
		if got := allocated(t, path); got < PreallocBytes {
			t.Errorf("open log has %d bytes of blocks, want at least %d reserved", got, PreallocBytes)
		}
	}
	mustVerify(t, path, n)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	mustBeJSONLines(t, path, linesLen(n))
	if got := allocated(t, path); got >= PreallocBytes {
		t.Errorf("closed log still has %d bytes of blocks", got)
	}
	mustVerify(t, path, n)
}

// TestLegacyZeroTailIsCut: a file an earlier version left with a
// preallocated zero tail (a writer that crashed) is cut at its data by the
// first append, so it is plain JSON lines from then on.
func TestLegacyZeroTailIsCut(t *testing.T) {
	path := logPath(t)
	l := openLog(t, path, Options{})
	if err := l.Append(rec("a", 0)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(data, make([]byte, 4096)...), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, path, Filter{}); len(got) != 1 {
		t.Fatalf("read %d records past a zero tail, want 1", len(got))
	}
	l = openLog(t, path, Options{})
	if err := l.Append(rec("a", 1)); err != nil {
		t.Fatal(err)
	}
	more, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mustBeJSONLines(t, path, int64(len(more)))
	mustVerify(t, path, 2)
}

// mustBeJSONLines fails unless the file at path is size bytes of
// newline-terminated lines that each parse as JSON.
func mustBeJSONLines(t *testing.T, path string, size int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) != size || len(data) == 0 || data[len(data)-1] != '\n' {
		t.Fatalf("log is %d bytes, want %d bytes of newline-terminated lines", len(data), size)
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		t.Fatalf("log has a NUL byte at %d of %d", i, len(data))
	}
	for line := range bytes.Lines(data) {
		if !json.Valid(line) {
			t.Fatalf("line is not JSON: %q", line)
		}
	}
}

// allocated is how many bytes of disk blocks the file at path holds.
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Skip("no block count on this platform")
	}
	return st.Blocks * 512
}

// TestSubmitIsDurableByClose queues records without waiting; Close commits
// them, and each channel reports the outcome.
func TestSubmitIsDurableByClose(t *testing.T) {
	path := logPath(t)
	l, err := OpenOptions(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var chans []<-chan error
	for i := range 50 {
		chans = append(chans, l.Submit(rec("s", i)))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for i, ch := range chans {
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("record %d: %v", i, err)
			}
		default:
			t.Errorf("record %d: no outcome after Close", i)
		}
	}
	mustVerify(t, path, 50)
	if err := testproc.Recv(t, l.Submit(rec("s", 50)), "Submit's result after Close"); !errors.Is(err, ErrClosed) {
		t.Errorf("Submit after Close = %v, want ErrClosed", err)
	}
}

// TestWriteReturnsBeforeSync: Write returns once the line is in the file
// (a reader sees it) while its fdatasync is still held back; the sync's
// outcome arrives afterwards, and Close waits for it.
func TestWriteReturnsBeforeSync(t *testing.T) {
	path := logPath(t)
	inSync, release := make(chan struct{}, 1), make(chan struct{})
	l, err := OpenOptions(path, Options{syncData: func(f *os.File) error {
		select {
		case inSync <- struct{}{}:
		default:
		}
		<-release
		return datasync(f)
	}})
	if err != nil {
		t.Fatal(err)
	}

	type outcome struct {
		synced <-chan error
		err    error
	}
	wrote := make(chan outcome, 1)
	go func() {
		s := make(chan error, 1)
		err := l.Write(rec("w", 0), func(err error) { s <- err })
		wrote <- outcome{s, err}
	}()
	var o outcome
	select {
	case o = <-wrote:
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("Write waited for the held-back fdatasync")
	}
	if o.err != nil {
		close(release)
		t.Fatal(o.err)
	}
	var seen int
	if err := Read(path, Filter{}, func(Record) error { seen++; return nil }); err != nil || seen != 1 {
		t.Errorf("after Write, a reader sees %d records (%v), want 1", seen, err)
	}
	select {
	case err := <-o.synced:
		t.Errorf("sync outcome %v before the sync ran", err)
	default:
	}
	select {
	case <-inSync:
	case <-time.After(30 * time.Second):
		t.Error("the written line's fdatasync never started")
	}
	close(release)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-o.synced:
		if err != nil {
			t.Errorf("sync outcome: %v", err)
		}
	default:
		t.Error("no sync outcome after Close")
	}
	mustVerify(t, path, 1)
	if err := l.Write(rec("w", 1), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
}
