package testproc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// ContextSwitches sums the voluntary and involuntary context switches of
// every live thread of pid (/proc/PID/task/*/status).
func ContextSwitches(pid int) int64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	var n int64
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that exited
		}
		for line := range strings.Lines(string(data)) {
			if k, v, ok := strings.Cut(line, ":"); ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
				c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += c
			}
		}
	}
	return n
}
