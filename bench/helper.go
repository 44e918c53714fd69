//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"

	"github.com/exechost/exechost/internal/runner"
)

// helperEnv makes the bench binary act as a measured child process.
const helperEnv = "EXECHOST_BENCH_HELPER"

// countWriter counts what it is given.
type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

var _ io.Writer = (*countWriter)(nil)

// helperMain runs a helper role when helperEnv is set and reports whether
// it did. It prints its own peak RSS (VmHWM, kB) for the parent.
func helperMain() bool {
	role := os.Getenv(helperEnv)
	if role == "" {
		return false
	}
	var err error
	switch role {
	case "flood-capture":
		var res runner.Result
		res, err = runner.Run(context.Background(), runner.Spec{Argv: []string{"head", "-c", strconv.Itoa(floodBytes), "/dev/zero"}})
		if err == nil && (!res.Truncated || !res.Success) {
			err = fmt.Errorf("flood: exit %d truncated %v", res.ExitCode, res.Truncated)
		}
	case "flood-discard":
		cmd := exec.Command("head", "-c", strconv.Itoa(floodBytes), "/dev/zero")
		cw := &countWriter{}
		cmd.Stdout = cw
		err = cmd.Run()
		if err == nil && cw.n != floodBytes {
			err = fmt.Errorf("copied %d bytes", cw.n)
		}
	default:
		err = fmt.Errorf("unknown helper role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench helper:", err)
		os.Exit(1)
	}
	kb, err := procStatusKB(os.Getpid(), "VmHWM:")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench helper:", err)
		os.Exit(1)
	}
	fmt.Println(kb)
	os.Exit(0)
	return true
}
