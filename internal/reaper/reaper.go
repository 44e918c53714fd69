//go:build unix

// Package reaper is the body of the runner's reaper process (see
// runner.EnableReaper): a re-exec of the exechost binary (or of a test
// binary linking package runner) with the single argument Arg. It reads
// "+PGID" and "-PGID" lines from stdin and, at end-of-file (its parent is
// gone, however it died), SIGKILLs every process group still listed.
//
// It is a package of its own, importing only a few low-level standard
// packages, so that its init runs before the heavy package inits of the
// binary (Go initialises a ready package before any later-sorted one): the
// reaper process then stays at a Go program's floor of resident memory
// instead of paging in the whole binary's initialisation.
package reaper

import (
	"os"
	"os/signal"
	"syscall"
)

// Arg makes the binary run as the reaper instead of its normal main.
const Arg = "--exechost-reaper=v1"

func init() {
	if len(os.Args) == 2 && os.Args[1] == Arg {
		main()
	}
}

// maxLine bounds one request line; longer lines are skipped.
const maxLine = 32

// main is the reaper process. It ignores terminal signals (it sits in its
// own process group) so a Ctrl-C of the daemon reaches the daemon.
func main() {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE)
	groups := map[int]bool{}
	var buf [4096]byte
	var line []byte
	long := false
	for {
		n, err := syscall.Read(0, buf[:])
		if err == syscall.EINTR {
			continue
		}
		if n <= 0 {
			break
		}
		for _, c := range buf[:n] {
			if c != '\n' {
				if len(line) < maxLine {
					line = append(line, c)
				} else {
					long = true
				}
				continue
			}
			if !long {
				apply(groups, line)
			}
			line, long = line[:0], false
		}
	}
	for pgid := range groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	os.Exit(0)
}

// apply records one "+PGID" or "-PGID" line; anything else is ignored.
func apply(groups map[int]bool, line []byte) {
	if len(line) < 2 {
		return
	}
	pgid := 0
	for _, c := range line[1:] {
		if c < '0' || c > '9' || pgid > 1<<30 {
			return
		}
		pgid = pgid*10 + int(c-'0')
	}
	if pgid <= 1 {
		return
	}
	switch line[0] {
	case '+':
		groups[pgid] = true
	case '-':
		delete(groups, pgid)
	}
}
