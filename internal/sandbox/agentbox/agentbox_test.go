//go:build linux

package agentbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/sandbox/agent"
)

var errClosed = errors.New("test set closed")

// fake starts real agents (this test binary, which links package agent,
// becomes one with agent.Flag) outside any sandbox, and records what the
// Set asked of it; the handle is the agent's pid.
type fake struct {
	t        *testing.T
	mu       sync.Mutex
	starts   int
	stopped  []int
	failures []Failure
	startErr error
}

func (f *fake) funcs() Funcs[int] {
	return Funcs[int]{Start: f.start, Stop: f.stop, Fail: f.fail}
}

func (f *fake) start(ctx context.Context, bx *Box[int]) (int, *agent.Conn, error) {
	f.mu.Lock()
	f.starts++
	err := f.startErr
	f.mu.Unlock()
	if err != nil {
		return 0, nil, err
	}
	cmd := exec.Command(os.Args[0], agent.Flag)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, nil, err
	}
	if err := cmd.Start(); err != nil {
		return 0, nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	pid := cmd.Process.Pid
	f.t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL); <-exited })
	conn, err := agent.Start(ctx, stdout, stdin, func() { stdin.Close(); _ = syscall.Kill(-pid, syscall.SIGKILL) })
	if err != nil {
		return 0, nil, err
	}
	return pid, conn, nil
}

func (f *fake) stop(_ context.Context, pid int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = append(f.stopped, pid)
	return nil
}

func (f *fake) fail(kind Failure, err error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = append(f.failures, kind)
	return err
}

func (f *fake) counts() (starts, stops int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.starts, len(f.stopped)
}

func exec1(t *testing.T, s *Set[int], key string, argv ...string) (string, error) {
	t.Helper()
	return execIn(t, s, key, "/", argv...)
}

func execIn(t *testing.T, s *Set[int], key, cwd string, argv ...string) (string, error) {
	t.Helper()
	bx, err := s.Acquire(key, "main", "")
	if err != nil {
		return "", err
	}
	defer s.Release(bx)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := s.Exec(ctx, bx, agent.Request{Argv: argv, Cwd: cwd})
	return res.Stdout, err
}

func TestExecReusesTheBoxPerKey(t *testing.T) {
	f := &fake{t: t}
	s := New(f.funcs(), errClosed)
	defer s.Close(context.Background())
	for range 3 {
		if out, err := exec1(t, s, "a", "echo", "hi"); err != nil || out != "hi\n" {
			t.Fatalf("exec = %q, %v", out, err)
		}
	}
	if _, err := exec1(t, s, "b", "true"); err != nil {
		t.Fatal(err)
	}
	if starts, _ := f.counts(); starts != 2 {
		t.Errorf("starts = %d, want 2 (one per key)", starts)
	}
	if n := len(s.Handles()); n != 2 {
		t.Errorf("handles = %d, want 2", n)
	}
}

func TestDeadAgentIsReplaced(t *testing.T) {
	f := &fake{t: t}
	s := New(f.funcs(), errClosed)
	defer s.Close(context.Background())
	if _, err := exec1(t, s, "a", "true"); err != nil {
		t.Fatal(err)
	}
	conn := s.Lookup("a").Conn()
	old := s.Handles()[0]
	_ = syscall.Kill(-old, syscall.SIGKILL)
	select {
	case <-conn.Done():
	case <-time.After(time.Minute):
		t.Fatal("the killed agent's connection did not end within a minute")
	}
	if out, err := exec1(t, s, "a", "echo", "again"); err != nil || out != "again\n" {
		t.Fatalf("exec after the agent died = %q, %v", out, err)
	}
	if starts, stops := f.counts(); starts != 2 || stops != 1 || f.stopped[0] != old {
		t.Errorf("starts = %d, stopped = %v; want 2 starts and the dead box (%d) stopped", starts, f.stopped, old)
	}
}

func TestDiedWhileRunningIsNotRetried(t *testing.T) {
	f := &fake{t: t}
	s := New(f.funcs(), errClosed)
	defer s.Close(context.Background())
	if _, err := exec1(t, s, "a", "true"); err != nil {
		t.Fatal(err)
	}
	// The agent runs outside a pid namespace here, so the orphaned
	// command outlives it: a short sleep.
	marker := filepath.Join(t.TempDir(), "started")
	done := make(chan error, 1)
	go func() {
		_, err := exec1(t, s, "a", "/bin/sh", "-c", "touch "+marker+"; sleep 5")
		done <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("command never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = syscall.Kill(s.Handles()[0], syscall.SIGKILL)
	select {
	case err := <-done:
		if !errors.Is(err, agent.ErrDied) {
			t.Fatalf("exec whose agent died = %v, want agent.ErrDied", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Exec did not answer within a minute after its agent was killed")
	}
	if starts, stops := f.counts(); starts != 1 || stops != 1 {
		t.Errorf("starts = %d, stops = %d; want the command not run again and the box stopped", starts, stops)
	}
	if len(f.failures) != 1 || f.failures[0] != FailDied {
		t.Errorf("failures = %v, want [FailDied]", f.failures)
	}
}

func TestStartFailure(t *testing.T) {
	f := &fake{t: t, startErr: errors.New("no cluster")}
	s := New(f.funcs(), errClosed)
	defer s.Close(context.Background())
	if _, err := exec1(t, s, "a", "true"); err == nil || err.Error() != "no cluster" {
		t.Fatalf("exec = %v, want the start error", err)
	}
	if n := len(s.Handles()); n != 0 {
		t.Errorf("handles = %d after a failed start", n)
	}
}

func TestCommandStartFailure(t *testing.T) {
	f := &fake{t: t}
	s := New(f.funcs(), errClosed)
	defer s.Close(context.Background())
	if _, err := execIn(t, s, "a", "/no/such/dir", "true"); !errors.Is(err, agent.ErrStart) {
		t.Fatalf("exec = %v, want agent.ErrStart", err)
	}
	if len(f.failures) != 1 || f.failures[0] != FailStart {
		t.Errorf("failures = %v, want [FailStart]", f.failures)
	}
	if _, stops := f.counts(); stops != 0 {
		t.Errorf("a command that could not start stopped its box")
	}
}

func TestNoAgent(t *testing.T) {
	s := New(Funcs[int]{Start: func(context.Context, *Box[int]) (int, *agent.Conn, error) { return 7, nil, nil }}, errClosed)
	defer s.Close(context.Background())
	if _, err := exec1(t, s, "a", "true"); !errors.Is(err, ErrNoAgent) {
		t.Fatalf("exec in a box without an agent = %v, want ErrNoAgent", err)
	}
}

func TestReapIdleAndClose(t *testing.T) {
	f := &fake{t: t}
	s := New(f.funcs(), errClosed)
	if _, err := exec1(t, s, "a", "true"); err != nil {
		t.Fatal(err)
	}
	bx, err := s.Acquire("busy", "main", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Ensure(context.Background(), bx); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if n := s.ReapIdle(ctx, time.Now(), time.Hour); n != 0 {
		t.Fatalf("reaped %d fresh boxes", n)
	}
	if n := s.ReapIdle(ctx, time.Now().Add(2*time.Hour), time.Hour); n != 1 {
		t.Fatalf("reaped %d idle boxes, want 1 (the one in use stays)", n)
	}
	s.Release(bx)
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, stops := f.counts(); stops != 2 {
		t.Errorf("stops = %d after reap and Close, want 2", stops)
	}
	if _, err := s.Acquire("a", "main", ""); !errors.Is(err, errClosed) {
		t.Errorf("Acquire after Close = %v, want the closed error", err)
	}
	if _, _, err := s.Ensure(ctx, bx); !errors.Is(err, errClosed) {
		t.Errorf("Ensure after Close = %v, want the closed error", err)
	}
}
