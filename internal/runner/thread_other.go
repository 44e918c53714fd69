//go:build !linux

package runner

// onMainThread is false here: the in-thread start is Linux's
// (confine.Confinement.InThread), and no thread is restricted elsewhere.
func onMainThread() bool { return false }
