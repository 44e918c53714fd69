//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"syscall"

	"github.com/exechost/exechost/internal/config"
	"github.com/exechost/exechost/internal/gateway"
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
	case "gateway":
		err = profiledGateway()
		if err == nil {
			os.Exit(0)
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

// profiledGateway serves the gateway package from this process, with the
// state directory and config `exechost gateway` would use, and records a
// CPU profile between SIGUSR1 and SIGUSR2. It has no host=gateway
// executor: the scale rows only use host=node.
func profiledGateway() error {
	dir, profPath := os.Getenv("EXECHOST_BENCH_STATE"), os.Getenv("EXECHOST_BENCH_PROFILE")
	cfg, err := config.Load(filepath.Join(dir, "exechost.json"), true)
	if err != nil {
		return err
	}
	gw, err := gateway.New(gateway.Options{StateDir: dir, Config: cfg, Version: "bench"})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("listening url=ws://%s\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		var f *os.File
		for s := range sig {
			switch {
			case s == syscall.SIGUSR1 && f == nil:
				if f, err = os.Create(profPath); err == nil {
					err = pprof.StartCPUProfile(f)
				}
				if err != nil {
					fmt.Println("profile:", err)
				}
			case s == syscall.SIGUSR2 && f != nil:
				pprof.StopCPUProfile()
				f.Close()
				f = nil
				fmt.Println("profile written")
			}
		}
	}()
	return gw.Serve(ctx, ln)
}
