package jail

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/confine"
)

// The server serves every run from one thread and waits for them in its
// poll loop: runs that overlap and end in another order than they started
// each get their own status, a run that goes on never holds up another's
// start or end, and none is left a zombie once all have ended.
func TestOverlappingRunsEachGetTheirStatus(t *testing.T) {
	w := outsideDir(t)
	j := jailFor(t, confine.Confinement{Writable: []string{w}}, nil)
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	start := func(script string) *Proc {
		t.Helper()
		p, err := j.Start(Request{Argv: []string{"/bin/sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: w,
			Stdin: int(null.Fd()), Stdout: int(null.Fd()), Stderr: int(null.Fd()), Exec: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}

	// A run that goes on until it is killed.
	long := start("sleep 100")

	// Runs started in order that end in the reverse order, each with its
	// own code: each waits for the file its successor writes as it ends.
	const n = 6
	procs := make([]*Proc, n)
	for i := range n {
		script := fmt.Sprintf("exit %d", 10+i)
		if i < n-1 {
			next := filepath.Join(w, "ended-"+strconv.Itoa(i+1))
			script = fmt.Sprintf("while [ ! -e %s ]; do sleep 0.02; done; exit %d", next, 10+i)
		}
		procs[i] = start(fmt.Sprintf("trap 'touch %s' EXIT; %s", filepath.Join(w, "ended-"+strconv.Itoa(i)), script))
	}
	for i := n - 1; i >= 0; i-- {
		st, err := procs[i].Wait(30 * time.Second)
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if st.ExitStatus() != 10+i {
			t.Errorf("run %d: status %d, want %d", i, st.ExitStatus(), 10+i)
		}
	}

	// The long run holds up neither a start nor an end.
	began := time.Now()
	st, err := start("exit 7").Wait(30 * time.Second)
	if err != nil || st.ExitStatus() != 7 {
		t.Fatalf("a run beside a long one: status %v, %v", st, err)
	}
	if d := time.Since(began); d > 20*time.Second {
		t.Fatalf("a run beside a long one took %s", d)
	}
	if err := long.Kill(); err != nil {
		t.Fatal(err)
	}
	if st, err := long.Wait(30 * time.Second); err != nil || !st.Signaled() {
		t.Fatalf("the killed run: status %v, %v", st, err)
	}

	// Every run has been reaped: the server has no child left but its
	// warm process (none here: no run asked for one).
	deadline := time.Now().Add(10 * time.Second)
	for {
		kids := children(t, j.Pid())
		if len(kids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server still has children %v after every run ended", kids)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// children are pid's child processes.
func children(t *testing.T, pid int) []string {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("no tasks of %d: %v", pid, err)
	}
	var out []string
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.Fields(string(b))...)
	}
	return out
}
