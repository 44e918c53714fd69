package audit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// writeLock is the cross-process lock on path+".lock" that serialises
// writers. It keeps one descriptor open for the Log's life and flocks it:
// gofrs/flock (used where flock(2) is not) closes its descriptor on every
// Unlock, which costs an open, four fcntls and a close per group, twice per
// exec. flock locks belong to the open file description, so another Log
// (in this process or another) still conflicts with this one.
type writeLock struct {
	path string
	f    *os.File
}

func newWriteLock(path string) *writeLock { return &writeLock{path: path} }

// lock takes the lock, retrying every retry until ctx ends; false (and no
// error) means ctx ended first. If the lock file was removed or replaced
// while the descriptor was open, the lock is taken again on the file now
// at the path, so writers that open it afresh still exclude this one.
func (w *writeLock) lock(ctx context.Context, retry time.Duration) (bool, error) {
	for {
		if w.f == nil {
			f, err := os.OpenFile(w.path, os.O_CREATE|os.O_RDWR|openFlags, 0o600)
			if err != nil {
				return false, err
			}
			w.f = f
		}
		err := unix.Flock(int(w.f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			if w.current() {
				return true, nil
			}
			w.close() // releases the lock on the stale file; reopen
			if ctx.Err() != nil {
				return false, nil
			}
			continue
		case !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR):
			return false, fmt.Errorf("flock %s: %w", w.path, err)
		}
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, nil
		case <-t.C:
		}
	}
}

// current reports whether the open descriptor is still the file at path.
func (w *writeLock) current() bool {
	var held, now unix.Stat_t
	if unix.Fstat(int(w.f.Fd()), &held) != nil || unix.Lstat(w.path, &now) != nil {
		return false
	}
	return held.Dev == now.Dev && held.Ino == now.Ino
}

func (w *writeLock) unlock() error {
	if w.f == nil {
		return nil
	}
	return unix.Flock(int(w.f.Fd()), unix.LOCK_UN)
}

func (w *writeLock) close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}
