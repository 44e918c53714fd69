package jail

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/runner"
)

// The runner's supervision holds on the jailed path: output capture,
// exit status, start failures, the timeout that kills everything, the
// output cap, and the pinned executable.
func TestRunnerJailed(t *testing.T) {
	w := outsideDir(t)
	j := jailFor(t, confine.Confinement{Writable: []string{w}, Network: confine.NetworkNone}, nil)
	ctx := context.Background()

	t.Run("output and status", func(t *testing.T) {
		res, err := runner.Run(ctx, runner.Spec{Argv: []string{"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, Cwd: w, Jail: j})
		if err != nil {
			t.Fatal(err)
		}
		if res.Stdout != "out\n" || res.Stderr != "err\n" || res.ExitCode != 3 || res.Success {
			t.Fatalf("result %+v", res)
		}
		if !slices.Equal(res.Layers, j.Held()) || len(res.Layers) == 0 {
			t.Fatalf("layers %v, jail holds %v", res.Layers, j.Held())
		}
	})
	t.Run("missing program", func(t *testing.T) {
		res, err := runner.Run(ctx, runner.Spec{Argv: []string{"/no/such/program"}, Jail: j})
		if err == nil || res.ExitCode != 127 {
			t.Fatalf("err %v, exit %d", err, res.ExitCode)
		}
	})
	t.Run("timeout kills the whole run", func(t *testing.T) {
		marker := filepath.Join(w, "late")
		start := time.Now()
		res, err := runner.Run(ctx, runner.Spec{Argv: []string{"/bin/sh", "-c", "(sleep 1; touch " + marker + ") & sleep 60"}, Timeout: 300 * time.Millisecond, Jail: j})
		if err != nil {
			t.Fatal(err)
		}
		if !res.TimedOut || res.ExitCode != -1 || time.Since(start) > 10*time.Second {
			t.Fatalf("result %+v after %s", res, time.Since(start))
		}
		time.Sleep(1500 * time.Millisecond)
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("a process the run left outlived its timeout")
		}
	})
	t.Run("output cap", func(t *testing.T) {
		res, err := runner.Run(ctx, runner.Spec{Argv: []string{"/bin/sh", "-c", "head -c 300000 /dev/zero | tr '\\0' a"}, MaxOutput: 100000, Jail: j})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Truncated || !strings.HasPrefix(res.Stdout, "aaaa") || res.ExitCode != 0 {
			t.Fatalf("truncated %v exit %d len %d", res.Truncated, res.ExitCode, len(res.Stdout))
		}
	})
	t.Run("pinned executable", func(t *testing.T) {
		id, err := runner.IDOf("/bin/echo")
		if err != nil {
			t.Fatal(err)
		}
		res, err := runner.Run(ctx, runner.Spec{Argv: []string{"/bin/echo", "pinned"}, Executable: &id, Jail: j})
		if err != nil || res.Stdout != "pinned\n" {
			t.Fatalf("err %v result %+v", err, res)
		}
		other, err := runner.IDOf("/bin/true")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := runner.Run(ctx, runner.Spec{Argv: []string{"/bin/echo", "swapped"}, Executable: &other, Jail: j}); err == nil {
			t.Fatal("a file other than the one decided on started")
		}
	})
	t.Run("network none", func(t *testing.T) {
		res, err := runner.Run(ctx, runner.Spec{Argv: []string{"/bin/cat", "/proc/net/dev"}, Jail: j})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(res.Stdout, "eth") || !strings.Contains(res.Stdout, "lo:") {
			t.Fatalf("interfaces seen: %q", res.Stdout)
		}
	})
}
