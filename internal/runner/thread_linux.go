package runner

import (
	"os"

	"golang.org/x/sys/unix"
)

// onMainThread reports whether the calling (locked) goroutine runs on the
// process's main thread.
func onMainThread() bool { return unix.Gettid() == os.Getpid() }
