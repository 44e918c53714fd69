package audit

import (
	"errors"
	"os"
	"sync"
	"testing"
	"time"
)

// TestGroupCommitSharesOneSync stalls the first fdatasync until every other
// appender has queued its record, which they can only do if no lock is held
// across the sync; the second group must then carry them all with one more
// sync.
func TestGroupCommitSharesOneSync(t *testing.T) {
	path := logPath(t)
	l := openLog(t, path, Options{})
	const n = 16
	var (
		mu    sync.Mutex
		syncs int
	)
	errs := make(chan error, n)
	if err := l.Append(rec("w", 0)); err != nil { // warm: preallocates
		t.Fatal(err)
	}
	stallErr := make(chan error, 1)
	syncData = func(f *os.File) error {
		mu.Lock()
		syncs++
		first := syncs == 1
		mu.Unlock()
		if first {
			stallErr <- waitQueued(l, n-1, 30*time.Second)
		}
		return datasync(f)
	}
	t.Cleanup(func() { syncData = datasync })

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
	if err := <-stallErr; err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; err != nil {
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

// TestPreallocatedTail checks the file's shape: the first preallocAfter
// groups (a one-shot CLI run) are written past the end as before; later
// ones land in a preallocated zero tail that readers do not see; Close cuts
// the file back to plain JSON lines.
func TestPreallocatedTail(t *testing.T) {
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
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	for i := range preallocAfter {
		if err := l.Append(r); err != nil {
			t.Fatal(err)
		}
		if got, want := size(), linesLen(i+1); got != want {
			t.Fatalf("after %d appends the file is %d bytes, want %d (no preallocation yet)", i+1, got, want)
		}
	}
	if err := l.Append(r); err != nil {
		t.Fatal(err)
	}
	if got := size(); got != PreallocBytes {
		t.Errorf("open log is %d bytes, want preallocated %d", got, PreallocBytes)
	}
	mustVerify(t, path, preallocAfter+1)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if want := linesLen(preallocAfter + 1); int64(len(data)) != want || data[len(data)-1] != '\n' {
		t.Errorf("closed log is %d bytes ending %q, want %d bytes of lines", len(data), data[len(data)-1:], want)
	}
	mustVerify(t, path, preallocAfter+1)
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
	if err := <-l.Submit(rec("s", 50)); !errors.Is(err, ErrClosed) {
		t.Errorf("Submit after Close = %v, want ErrClosed", err)
	}
}

// TestWriteReturnsBeforeSync: Write returns once the line is in the file
// (a reader sees it) while its fdatasync is still held back; the sync's
// outcome arrives afterwards, and Close waits for it.
func TestWriteReturnsBeforeSync(t *testing.T) {
	path := logPath(t)
	l, err := OpenOptions(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	inSync, release := make(chan struct{}, 1), make(chan struct{})
	syncData = func(f *os.File) error {
		select {
		case inSync <- struct{}{}:
		default:
		}
		<-release
		return datasync(f)
	}
	t.Cleanup(func() { syncData = datasync })

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
