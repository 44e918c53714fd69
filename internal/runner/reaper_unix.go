//go:build unix

package runner

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/reaper"
)

// The reaper kills what a dead runner leaves behind (its process body is
// package reaper). A parent-death signal reaches only a command's direct
// child, so when a daemon is SIGKILLed the rest of each command's process
// group would run on. The reaper is a re-exec of the same binary holding
// the read end of a pipe whose write end only the runner holds, and the
// runner's table of live process groups: a small file both map, in which
// the runner stores each group it starts in a free slot and clears the
// slot when the group is finished. When the pipe reaches end-of-file —
// the runner is gone, however it died — the reaper reads the table and
// SIGKILLs every group still in it. Tracking a run is two memory stores:
// no system call, and the reaper never wakes while the runner lives. It
// ignores terminal signals (it sits in its own process group) so a Ctrl-C
// of the daemon reaches the daemon, whose own shutdown then kills its
// commands.
var reaperState struct {
	mu      sync.Mutex
	enabled bool
	alive   *os.File // the pipe's write end, held open for the reaper's EOF
	table   []byte   // the shared table (reaper.Slots slots of 4 bytes)
	free    []int32  // free slots of table
}

// ErrTooManyRuns refuses a run the reaper could not track: more commands
// than its table holds (reaper.Slots) would then outlive a crashed daemon.
var ErrTooManyRuns = errors.New("too many commands running at once to track them for cleanup")

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
	tf, err := newTableFile()
	if err != nil {
		return fmt.Errorf("start reaper: table: %w", err)
	}
	defer tf.Close() // the mapping and the reaper's copy keep it
	const size = reaper.Slots * 4
	if err := tf.Truncate(size); err != nil {
		return fmt.Errorf("start reaper: table: %w", err)
	}
	table, err := unix.Mmap(int(tf.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("start reaper: map table: %w", err)
	}
	slot(table, 0).Store(reaper.Marker)
	r, w, err := os.Pipe()
	if err != nil {
		_ = unix.Munmap(table)
		return fmt.Errorf("start reaper: %w", err)
	}
	cmd := exec.Command(exe, reaper.Arg)
	cmd.Stdin = r
	cmd.ExtraFiles = []*os.File{tf} // descriptor 3: reaper.TableFD
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		_ = unix.Munmap(table)
		return fmt.Errorf("start reaper: %w", err)
	}
	r.Close()
	go func() {
		_ = cmd.Wait()
		// The reaper is gone (killed by hand?): runs go on untracked, as
		// without a reaper, and the runner still kills on timeout.
		reaperState.mu.Lock()
		reaperState.enabled = false
		reaperState.mu.Unlock()
	}()
	free := make([]int32, 0, reaper.Slots-1)
	for i := reaper.Slots - 1; i >= 1; i-- {
		free = append(free, int32(i))
	}
	reaperState.alive, reaperState.table, reaperState.free, reaperState.enabled = w, table, free, true
	return nil
}

// slot is slot i of a table, stored to atomically so that the reaper
// never reads half of an id, whenever the runner dies.
func slot(table []byte, i int) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&table[i*4]))
}

// reaperTrack records a started process group in the reaper's table and
// returns the function that clears it once the group is finished. With no
// reaper it does nothing; with a full table it fails, and the caller must
// kill the group rather than run it untracked.
func reaperTrack(pgid int) (untrack func(), err error) {
	reaperState.mu.Lock()
	if !reaperState.enabled || pgid <= 1 {
		reaperState.mu.Unlock()
		return func() {}, nil
	}
	n := len(reaperState.free)
	if n == 0 {
		reaperState.mu.Unlock()
		return nil, hint.Wrap(fmt.Errorf("%w (limit %d)", ErrTooManyRuns, reaper.Slots-1), "lower the daemon's limit on runs in flight")
	}
	i := reaperState.free[n-1]
	reaperState.free = reaperState.free[:n-1]
	table := reaperState.table
	reaperState.mu.Unlock()
	slot(table, int(i)).Store(uint32(pgid))
	return func() {
		slot(table, int(i)).Store(0)
		reaperState.mu.Lock()
		reaperState.free = append(reaperState.free, i)
		reaperState.mu.Unlock()
	}, nil
}
