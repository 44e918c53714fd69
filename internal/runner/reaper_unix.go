//go:build unix

package runner

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/exechost/exechost/internal/reaper"
)

// The reaper kills what a dead runner leaves behind (its process body is
// package reaper). A parent-death signal reaches only a command's direct
// child, so when a daemon is SIGKILLed the rest of each command's process group would run on. The reaper is a
// re-exec of the same binary holding the read end of a pipe from its
// parent: the runner reports each process group it starts ("+PGID") and
// finishes ("-PGID"), and when the pipe reaches end-of-file — the parent is
// gone, however it died — the reaper SIGKILLs every group still listed and
// exits. It ignores terminal signals (it sits in its own process group) so
// a Ctrl-C of the daemon reaches the daemon, whose own shutdown then kills
// its commands.
var reaperState struct {
	mu      sync.Mutex
	w       *os.File
	enabled bool
}

// EnableReaper starts the reaper for this process; long-running daemons
// (gateway, node runner, approver exec host) call it once at start. It
// reports why it could not start; Run works without it.
func EnableReaper() error {
	reaperState.mu.Lock()
	defer reaperState.mu.Unlock()
	if reaperState.enabled {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("start reaper: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start reaper: %w", err)
	}
	cmd := exec.Command(exe, reaper.Arg)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return fmt.Errorf("start reaper: %w", err)
	}
	r.Close()
	go func() { _ = cmd.Wait() }()
	reaperState.w, reaperState.enabled = w, true
	return nil
}

// reaperTrack tells the reaper about a started process group and returns
// the function that tells it the group is finished.
func reaperTrack(pgid int) func() {
	if !reaperSend('+', pgid) {
		return func() {}
	}
	reaperTracked(pgid)
	return func() { reaperSend('-', pgid) }
}

// reaperTracked is a test hook: called once the reaper has been told of a
// group, so a test that kills the runner knows the reaper can act.
var reaperTracked = func(int) {}

func reaperSend(op byte, pgid int) bool {
	reaperState.mu.Lock()
	defer reaperState.mu.Unlock()
	if !reaperState.enabled || pgid <= 0 {
		return false
	}
	// One short write is atomic on a pipe (PIPE_BUF).
	if _, err := fmt.Fprintf(reaperState.w, "%c%d\n", op, pgid); err != nil {
		reaperState.enabled = false // the reaper is gone; the runner still kills on timeout
		return false
	}
	return true
}
