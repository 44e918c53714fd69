//go:build unix

package runner

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/reexec"
)

// helperEnv selects a helper role when the test binary re-executes itself.
const helperEnv = "EXECHOST_RUNNER_TEST_HELPER"

// launcherEnv=portable runs the tests with the portable launcher even
// where the polled one works (TestPortableLauncher).
const launcherEnv = "EXECHOST_RUNNER_TEST_LAUNCHER"

// floodBytes is the size of the flood benchmarks: 1 GiB.
const floodBytes = 1 << 30

// TestMain lets the test binary play the processes the tests need: a
// grandchild that escapes the process group, a runner that dies while its
// command runs, and the measured side of the peak-RSS benchmark.
func TestMain(m *testing.M) {
	if reexec.Init() {
		return // the reaper (the orphan-tree role enables it)
	}
	if os.Getenv(launcherEnv) == "portable" {
		testRunner = New(Portable()) // see TestPortableLauncher
	}
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "escape":
		// Leave the runner's process group with stdout still open.
		if _, err := syscall.Setsid(); err != nil {
			fmt.Fprintln(os.Stderr, "setsid:", err)
			os.Exit(1)
		}
		time.Sleep(100 * time.Second)
		os.Exit(0)
	case "orphan":
		// Run a command that records its pid and sleeps; the test kills
		// this process meanwhile.
		res, err := testRunner.Run(context.Background(), Spec{
			Command: `echo $$ > "$EXECHOST_RUNNER_TEST_PIDFILE.tmp" && mv "$EXECHOST_RUNNER_TEST_PIDFILE.tmp" "$EXECHOST_RUNNER_TEST_PIDFILE" && exec sleep 100`,
		})
		fmt.Println(res.ExitCode, err)
		os.Exit(3)
	case "orphan-tree":
		// Like orphan, but the command leaves background grandchildren,
		// which only the reaper can take down when this process dies.
		if err := EnableReaper(); err != nil {
			fmt.Fprintln(os.Stderr, "reaper:", err)
			os.Exit(1)
		}
		// The command can record its pids before Run has told the reaper
		// of its group: say when the reaper knows, so the test kills this
		// process only then.
		res, err := testRunner.Run(context.Background(), Spec{
			tracked: func(int) {
				_ = os.WriteFile(os.Getenv("EXECHOST_RUNNER_TEST_PIDFILE")+".tracked", []byte("1"), 0o600)
			},
			Command: `sleep 100 & a=$!; sleep 100 & b=$!; echo "$$ $a $b" > "$EXECHOST_RUNNER_TEST_PIDFILE.tmp" && mv "$EXECHOST_RUNNER_TEST_PIDFILE.tmp" "$EXECHOST_RUNNER_TEST_PIDFILE"; wait`,
		})
		fmt.Println(res.ExitCode, err)
		os.Exit(3)
	case "warm":
		os.Exit(warmHelper())
	case "warm-launcher":
		// A warm process handed a launcher's argv becomes the launcher,
		// as shellrun.MainWarm's does.
		argv, err := AwaitHandOver()
		if err != nil || len(argv) < 4 || argv[1] != confine.Arg {
			fmt.Fprintln(os.Stderr, "warm launcher:", err, argv)
			os.Exit(2)
		}
		os.Exit(confine.Launch(argv[2], argv[3:]))
	case "dial":
		// Connect to EXECHOST_RUNNER_TEST_ADDR over TCP and say whether
		// it worked.
		c, err := net.Dial("tcp", os.Getenv("EXECHOST_RUNNER_TEST_ADDR"))
		if err != nil {
			fmt.Println("refused:", err)
			os.Exit(1)
		}
		c.Close()
		fmt.Println("connected")
		os.Exit(0)
	case "orphan-confined":
		// Like orphan, started in-thread confined (ConfineInThread).
		dir := filepath.Dir(os.Getenv("EXECHOST_RUNNER_TEST_PIDFILE"))
		res, err := testRunner.Run(context.Background(), Spec{
			Command:      `echo $$ > "$EXECHOST_RUNNER_TEST_PIDFILE.tmp" && mv "$EXECHOST_RUNNER_TEST_PIDFILE.tmp" "$EXECHOST_RUNNER_TEST_PIDFILE" && exec sleep 100`,
			Confine:      &confine.Confinement{Writable: []string{dir}, Network: confine.NetworkNone},
			confineStart: ConfineInThread,
		})
		fmt.Println(res.ExitCode, err)
		os.Exit(3)
	case "ptrace-parent":
		os.Exit(ptraceParent())
	case "shielded-reach":
		os.Exit(shieldedReach())
	case "flood":
		os.Exit(floodHelper(true))
	case "flood-baseline":
		os.Exit(floodHelper(false))
	default:
		fmt.Fprintln(os.Stderr, "unknown helper role", os.Getenv(helperEnv))
		os.Exit(2)
	}
}

// floodHelper runs the 1 GiB flood once, through Run (capture) or with
// plain os/exec into io.Discard (the baseline), and prints
// "<VmHWM kB> <bytes> <seconds>" for the parent benchmark.
func floodHelper(capture bool) int {
	start := time.Now()
	var n int64
	argv := []string{"head", "-c", strconv.Itoa(floodBytes), "/dev/zero"}
	if capture {
		res, err := testRunner.Run(context.Background(), Spec{Argv: argv})
		if err != nil || !res.Success || !res.Truncated || len(res.Tail) != len("…")+TailSize {
			fmt.Fprintln(os.Stderr, "flood run failed:", err, res.ExitCode, res.Error)
			return 1
		}
		n = floodBytes
	} else {
		cmd := exec.Command(argv[0], argv[1:]...)
		cw := &countWriter{}
		cmd.Stdout = cw
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "flood baseline failed:", err)
			return 1
		}
		n = cw.n
	}
	secs := time.Since(start).Seconds()
	hwm, err := vmHWM()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(hwm, n, secs)
	return 0
}

// countWriter counts and discards what it is given.
type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

var _ io.Writer = (*countWriter)(nil)
