//go:build !linux

package runner

// polledLauncher is nil where the polled launcher does not exist (it needs
// Linux's pidfds): the portable launcher runs (see launch_linux.go).
func polledLauncher() launcher { return nil }
