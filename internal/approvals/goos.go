package approvals

import "runtime"

// isWindows skips Unix permission checks that mean nothing under ACLs.
const isWindows = runtime.GOOS == "windows"
