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

// starters are the ways a confined command starts (issue 47's seam), each
// a change to the Spec: every one passes the same conformance cases.
func starters(t *testing.T, c confine.Confinement) []struct {
	name string
	set  func(*runner.Spec)
} {
	j := jailFor(t, c, nil)
	return []struct {
		name string
		set  func(*runner.Spec)
	}{
		{"unconfined", func(*runner.Spec) {}},
		{"landlock launcher", func(s *runner.Spec) { s.Confine = &c }},
		{"jail", func(s *runner.Spec) { s.Jail = j }},
	}
}

// TestStarterConformance: every starter captures output and status,
// reports a missing program as never started, kills everything on a
// timeout, caps output and starts only the file decided on.
func TestStarterConformance(t *testing.T) {
	w := outsideDir(t)
	c := confine.Confinement{Writable: []string{w}, Network: confine.NetworkNone}
	for _, st := range starters(t, c) {
		t.Run(st.name, func(t *testing.T) { conformance(t, w, st.set) })
	}
}

func conformance(t *testing.T, w string, set func(*runner.Spec)) {
	ctx := context.Background()
	run := func(s runner.Spec) (runner.Result, error) {
		set(&s)
		return runner.Run(ctx, s)
	}

	t.Run("output and status", func(t *testing.T) {
		res, err := run(runner.Spec{Argv: []string{"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, Cwd: w})
		if err != nil {
			t.Fatal(err)
		}
		if res.Stdout != "out\n" || res.Stderr != "err\n" || res.ExitCode != 3 || res.Success {
			t.Fatalf("result %+v", res)
		}
	})
	t.Run("missing program", func(t *testing.T) {
		res, err := run(runner.Spec{Argv: []string{"/no/such/program"}})
		if err == nil || res.ExitCode != 127 {
			t.Fatalf("err %v, exit %d", err, res.ExitCode)
		}
	})
	t.Run("timeout kills the whole run", func(t *testing.T) {
		marker := filepath.Join(w, "late")
		start := time.Now()
		res, err := run(runner.Spec{Argv: []string{"/bin/sh", "-c", "(sleep 1; touch " + marker + ") & sleep 60"}, Timeout: 300 * time.Millisecond})
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
		res, err := run(runner.Spec{Argv: []string{"/bin/sh", "-c", "head -c 300000 /dev/zero | tr '\\0' a"}, MaxOutput: 100000})
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
		res, err := run(runner.Spec{Argv: []string{"/bin/echo", "pinned"}, Executable: &id})
		if err != nil || res.Stdout != "pinned\n" {
			t.Fatalf("err %v result %+v", err, res)
		}
		other, err := runner.IDOf("/bin/true")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := run(runner.Spec{Argv: []string{"/bin/echo", "swapped"}, Executable: &other}); err == nil {
			t.Fatal("a file other than the one decided on started")
		}
	})
}

// TestRunnerJailed: a jailed run's result names the layers that held it,
// and network none leaves it only a loopback of its own.
func TestRunnerJailed(t *testing.T) {
	j := jailFor(t, confine.Confinement{Writable: []string{outsideDir(t)}, Network: confine.NetworkNone}, nil)
	res, err := runner.Run(context.Background(), runner.Spec{Argv: []string{"/bin/cat", "/proc/net/dev"}, Jail: j})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Layers, j.Held()) || len(res.Layers) == 0 {
		t.Fatalf("layers %v, jail holds %v", res.Layers, j.Held())
	}
	if strings.Contains(res.Stdout, "eth") || !strings.Contains(res.Stdout, "lo:") {
		t.Fatalf("interfaces seen: %q", res.Stdout)
	}
	// The run holds its stdio and nothing of the jail's (its control
	// socket would hand it other runs' requests).
	res, err = runner.Run(context.Background(), runner.Spec{Argv: []string{"/bin/sh", "-c", "exec ls -l /proc/self/fd"}, Jail: j})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Stdout, "socket:") || res.ExitCode != 0 {
		t.Fatalf("the run holds a socket: %q %q", res.Stdout, res.Stderr)
	}
}
