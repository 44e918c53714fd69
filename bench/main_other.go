//go:build !linux

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "bench: the benchmarks run on Linux only (they read /proc and use Linux rusage)")
	os.Exit(1)
}
