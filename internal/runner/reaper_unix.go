//go:build unix

package runner

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
)

// reaperArg makes the exechost binary (or a test binary linking this
// package) run as the reaper instead of its normal main.
const reaperArg = "--exechost-reaper=v1"

func init() {
	if len(os.Args) == 2 && os.Args[1] == reaperArg {
		reaperMain()
	}
}

// The reaper kills what a dead runner leaves behind. A parent-death signal
// reaches only a command's direct child, so when a daemon is SIGKILLed the
// rest of each command's process group would run on. The reaper is a
// re-exec of the same binary holding the read end of a pipe from its
// parent: the runner reports each process group it starts ("+PGID") and
// finishes ("-PGID"), and when the pipe reaches end-of-file — the parent is
// gone, however it died — the reaper SIGKILLs every group still listed and
// exits. It ignores terminal signals (it sits in its own process group) so
// a Ctrl-C of the daemon reaches the daemon, whose own shutdown then kills
// its commands.
var reaper struct {
	mu      sync.Mutex
	w       *os.File
	enabled bool
}

// EnableReaper starts the reaper for this process; long-running daemons
// (gateway, node runner, approver exec host) call it once at start. It
// reports why it could not start; Run works without it.
func EnableReaper() error {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	if reaper.enabled {
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
	cmd := exec.Command(exe, reaperArg)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return fmt.Errorf("start reaper: %w", err)
	}
	r.Close()
	go func() { _ = cmd.Wait() }()
	reaper.w, reaper.enabled = w, true
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
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	if !reaper.enabled || pgid <= 0 {
		return false
	}
	// One short write is atomic on a pipe (PIPE_BUF).
	if _, err := fmt.Fprintf(reaper.w, "%c%d\n", op, pgid); err != nil {
		reaper.enabled = false // the reaper is gone; the runner still kills on timeout
		return false
	}
	return true
}

// reaperMain is the reaper process.
func reaperMain() {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE)
	groups := map[int]bool{}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		pgid, err := strconv.Atoi(line[1:])
		if err != nil || pgid <= 1 {
			continue
		}
		switch line[0] {
		case '+':
			groups[pgid] = true
		case '-':
			delete(groups, pgid)
		}
	}
	for pgid := range groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	os.Exit(0)
}
