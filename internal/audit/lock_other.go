//go:build !linux

package audit

import (
	"context"
	"os"
	"time"

	"github.com/gofrs/flock"
)

// writeLock is the cross-process lock on path+".lock" that serialises
// writers (lock_linux.go keeps its descriptor open instead).
type writeLock struct{ fl *flock.Flock }

func newWriteLock(path string) *writeLock {
	return &writeLock{flock.New(path, flock.SetFlag(os.O_CREATE|os.O_RDWR|openFlags), flock.SetPermissions(0o600))}
}

// lock takes the lock, retrying every retry until ctx ends; false (and no
// error) means ctx ended first.
func (w *writeLock) lock(ctx context.Context, retry time.Duration) (bool, error) {
	ok, err := w.fl.TryLockContext(ctx, retry)
	if err != nil && ctx.Err() != nil {
		return false, nil
	}
	return ok, err
}

func (w *writeLock) unlock() error { return w.fl.Unlock() }
func (w *writeLock) close() error  { return w.fl.Close() }
