package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/testproc"
)

// warmHelper is a warm process (helper role "warm"): it takes its
// hand-over and prints what it became: its cwd, argv, environment and
// whether it leads its own process group.
func warmHelper() int {
	argv, err := AwaitHandOver()
	if errors.Is(err, ErrNoHandOver) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if len(argv) > 3 && argv[1] == confine.Arg {
		// The confining launcher's argv (confine.Wrap): say what the
		// launcher would exec (the confinement's Exec, the pinned file's
		// descriptor path) and which file that is, and what it would run.
		var c confine.Confinement
		if err := json.Unmarshal([]byte(argv[2]), &c); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		var st unix.Stat_t
		if err := unix.Stat(c.Exec, &st); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Printf("exec=%s\nfile=%d:%d\nargv=%s\n", c.Exec, st.Dev, st.Ino, strings.Join(argv[3:], ","))
		return 7
	}
	wd, _ := os.Getwd()
	env := os.Environ()
	slices.Sort(env)
	pgid, _ := syscall.Getpgid(0)
	fmt.Printf("cwd=%s\nargv=%s\nenv=%s\nleader=%v\n", wd, strings.Join(argv[1:], ","), strings.Join(env, ","), pgid == os.Getpid())
	return 7
}

func gone(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return errors.Is(err, os.ErrNotExist)
}

// TestWarmHandOver: a warm process becomes what a fresh start of the Spec
// would be — its argv, the Spec's environment (replaced whole: nothing of
// the environment it started with is left) and cwd — in its own process
// group; it is used once; what cannot be applied to a started process is
// refused; an unused one is ended by Close.
func TestWarmHandOver(t *testing.T) {
	if !testRunner.WarmSupported() {
		t.Skip("warm processes need the polled launcher")
	}
	s := NewWarmStarter()
	defer s.Close() // after every process below has been waited for
	start := func() *Warm {
		t.Helper()
		w, err := s.Start([]string{os.Args[0]}, []string{helperEnv + "=warm", "STALE=1"}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := start()
	dir := t.TempDir()
	res, err := testRunner.Run(context.Background(), Spec{Argv: []string{os.Args[0], "a b", "c"}, Cwd: dir, BaseEnv: []string{"A=1", "BASH_ENV=/x"}, Env: map[string]string{"B": "2"}, Warm: w})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("cwd=%s\nargv=a b,c\nenv=A=1,B=2\nleader=true\n", dir)
	if res.Stdout != want || res.ExitCode != 7 || res.Pid != w.Pid() {
		t.Fatalf("warm run: %+v\nwant stdout %q, exit 7, pid %d", res, want, w.Pid())
	}
	if !gone(w.Pid()) || w.Alive() {
		t.Errorf("the warm process %d outlived its run", w.Pid())
	}
	if _, err := testRunner.Run(context.Background(), Spec{Argv: []string{os.Args[0]}, Warm: w}); !errors.Is(err, ErrWarmGone) {
		t.Errorf("a second run of the same warm process: %v, want ErrWarmGone", err)
	}
	// One that died while it waited fails its run with ErrWarmGone,
	// before anything started (the caller then starts the run afresh).
	dead := start()
	fd, err := unix.PidfdOpen(dead.Pid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := syscall.Kill(dead.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if exited, err := testproc.AwaitExit(fd, time.Minute); !exited || err != nil {
		t.Fatalf("the killed warm process did not exit: %v", err)
	}
	if dead.Alive() {
		t.Error("a dead warm process reports itself alive")
	}
	started := false
	if _, err := testRunner.Run(context.Background(), Spec{Argv: []string{os.Args[0]}, Warm: dead, OnStart: func() { started = true }}); !errors.Is(err, ErrWarmGone) || started {
		t.Errorf("run in a dead warm process: %v (started %v), want ErrWarmGone before any start", err, started)
	}
	if !gone(dead.Pid()) {
		t.Errorf("the dead warm process %d was not reaped", dead.Pid())
	}
	for name, spec := range map[string]Spec{
		"pty": {PTY: true},
		// A pinned file without a launcher in front: a warm process
		// cannot become another program.
		"executable": {Executable: &FileID{}},
	} {
		w := start()
		spec.Argv, spec.Warm = []string{os.Args[0]}, w
		if _, err := testRunner.Run(context.Background(), spec); !errors.Is(err, ErrStart) {
			t.Errorf("%s: %v, want a refusal (ErrStart)", name, err)
		}
		if !w.Alive() {
			t.Errorf("%s: the refused warm process was used", name)
		}
		w.Close()
		if !gone(w.Pid()) {
			t.Errorf("%s: Close left process %d", name, w.Pid())
		}
	}
}

// TestWarmLauncherGetsThePinnedFile: with a launcher in front (Confine), a
// warm process is handed the launcher's argv and the decided file's
// descriptor, which it holds as ChildFD, so what it execs is the file
// decided on, as for a fresh launcher start.
func TestWarmLauncherGetsThePinnedFile(t *testing.T) {
	if !testRunner.WarmSupported() {
		t.Skip("warm processes need the polled launcher")
	}
	s := NewWarmStarter()
	defer s.Close()
	w, err := s.Start([]string{os.Args[0]}, []string{helperEnv + "=warm"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const prog = "/bin/true"
	id, err := IDOf(prog)
	if err != nil {
		t.Fatal(err)
	}
	c := &confine.Confinement{Writable: []string{t.TempDir()}, Network: confine.NetworkNone}
	res, err := testRunner.Run(context.Background(), Spec{Argv: []string{prog, "x"}, Executable: &id, Confine: c, Warm: w})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("exec=%s\nfile=%d:%d\nargv=%s,x\n", pinnedExecPath, id.Dev, id.Ino, prog)
	if res.Stdout != want || res.ExitCode != 7 || res.Pid != w.Pid() {
		t.Fatalf("warm launcher run: %+v\nwant stdout %q, exit 7, pid %d", res, want, w.Pid())
	}
}
