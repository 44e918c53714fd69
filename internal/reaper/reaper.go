//go:build unix

// Package reaper is the body of the runner's reaper process (see
// runner.EnableReaper): a re-exec of the exechost binary (or of a test
// binary linking package runner) with the single argument Arg. Its stdin
// is a pipe whose write end only its parent holds, and its descriptor 3 is
// the parent's table of live process groups (see Table). It waits for
// end-of-file on stdin — its parent is gone, however it died — then reads
// the table and SIGKILLs every process group listed in it.
//
// The parent writes nothing on the pipe: it records a group by storing its
// id in a slot of the shared table (a memory mapping of the same file), so
// tracking a command costs no system call and never wakes the reaper.
//
// It is a package of its own, importing only a few low-level standard
// packages and reexec, and registers with reexec.RegisterEarly, so that it
// runs from its own init, before the heavy package inits of the binary (Go
// initialises a ready package before any later-sorted one): the reaper
// process then stays at a Go program's floor of resident memory instead
// of paging in the whole binary's initialisation (dispatched from main
// like the other entry points, an idle reaper had three times the
// anonymous memory).
package reaper

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/exechost/exechost/internal/reexec"
)

// Arg makes the binary run as the reaper instead of its normal main. The
// version names the table's layout: a binary replaced on disk by one with
// another layout refuses to run as this parent's reaper.
const Arg = "--exechost-reaper=v2"

// The table (descriptor 3 of the reaper) is Slots 32-bit slots in the
// parent's native byte order. Slot 0 holds Marker, which tells the reaper
// that byte order; every other slot holds a process group id, or 0.
const (
	Slots  = 16384
	Marker = 0x01020304
	// TableFD is the reaper's descriptor of the table.
	TableFD = 3
)

// The reaper's entry point is early: see the package doc.
func init() { reexec.RegisterEarly(Arg, main) }

// main is the reaper process. It ignores terminal signals (it sits in its
// own process group) so a Ctrl-C of the daemon reaches the daemon.
func main() {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE)
	var buf [64]byte
	for {
		n, err := syscall.Read(0, buf[:])
		if err == syscall.EINTR {
			continue
		}
		if n <= 0 {
			break // end-of-file (or an error): the parent is gone
		}
	}
	table := make([]byte, Slots*4)
	n := 0
	for n < len(table) {
		m, err := syscall.Pread(TableFD, table[n:], int64(n))
		if err == syscall.EINTR {
			continue
		}
		if m <= 0 {
			break
		}
		n += m
	}
	for _, pgid := range Groups(table[:n]) {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	os.Exit(0)
}

// Groups decodes a table: the process group ids it lists. A table whose
// marker is in neither byte order lists nothing (killing a misread id
// could hit an unrelated group), and so does any slot outside 2..2^30.
func Groups(table []byte) []int {
	if len(table) < 4 {
		return nil
	}
	var order func(b []byte) uint32
	switch {
	case le(table) == Marker:
		order = le
	case be(table) == Marker:
		order = be
	default:
		return nil
	}
	var groups []int
	for i := 4; i+4 <= len(table); i += 4 {
		if v := order(table[i:]); v > 1 && v < 1<<30 {
			groups = append(groups, int(v))
		}
	}
	return groups
}

func le(b []byte) uint32 { return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24 }
func be(b []byte) uint32 { return uint32(b[3]) | uint32(b[2])<<8 | uint32(b[1])<<16 | uint32(b[0])<<24 }
