package testproc

import (
	"time"

	"golang.org/x/sys/unix"
)

// AwaitExit waits at most d for the process of pidfd to exit and reports
// whether it did. A signal interrupting the wait (the Go runtime preempts
// its threads with one) does not end it early.
func AwaitExit(pidfd int, d time.Duration) (bool, error) {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left < 0 {
			left = 0
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}, int((left+time.Millisecond-1)/time.Millisecond))
		switch {
		case err == unix.EINTR && left > 0:
			continue
		case err != nil:
			return false, err
		}
		return n == 1, nil
	}
}
