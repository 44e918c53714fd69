//go:build unix && !linux

package runner

import "golang.org/x/sys/unix"

const openFlags = unix.O_RDONLY | unix.O_CLOEXEC

// pinnedExecPath is empty: without /proc the file is checked at the start
// and started by its path (a swap in between is not caught here).
const pinnedExecPath = ""

// PinSupported says a pinned executable starts by its descriptor here.
const PinSupported = false
