package main

import (
	"fmt"
	"os"
	"syscall"
)

// raiseNoFile raises RLIMIT_NOFILE to its hard limit, for the harness and
// the gateway it starts (children inherit it): the scale rows hold one
// socket per simulated node on each side.
func raiseNoFile() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, "getrlimit:", err)
		return 0
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, "setrlimit:", err)
	}
	return lim.Cur
}
