//go:build unix && !linux

package runner

import "errors"

// vmHWM is Linux-only: other systems have no /proc/self/status.
func vmHWM() (int, error) { return 0, errors.New("peak RSS is measured on Linux only") }

// warmHelper: warm processes are Linux-only (WarmSupported).
func warmHelper() int { return 2 }

// ptraceParent: the in-thread start is Linux-only (confine.InThread).
func ptraceParent() int { return 2 }

// shieldedReach: the in-thread start is Linux-only (confine.InThread).
func shieldedReach() int { return 2 }
