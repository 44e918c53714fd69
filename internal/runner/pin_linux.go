package runner

import "golang.org/x/sys/unix"

const openFlags = unix.O_PATH | unix.O_CLOEXEC

// pinnedExecPath is the child's ChildFD as a path: the kernel resolves it
// to the open file, never to a name.
const pinnedExecPath = "/proc/self/fd/3"

// PinSupported says a pinned executable starts by its descriptor here.
const PinSupported = true
