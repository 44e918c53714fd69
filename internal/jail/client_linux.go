package jail

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/runner"
	"golang.org/x/sys/unix"
)

// Supported says jails can be built on this platform (Linux).
const Supported = true

// Jail is one running jail server. Start runs a command in it; Close ends
// it (its runs are killed with it). Safe for concurrent use.
type Jail struct {
	key     string
	held    []confine.Layer
	warning string
	pid     int
	pidfd   int
	mu      sync.Mutex // guards ctl, closed
	ctl     int
	closed  bool
	cgroup  string // the jail's pids cgroup, removed once it is closed
	handed  atomic.Int64
}

// Key is the jail's Options.Key.
func (j *Jail) Key() string { return j.key }

// Held are the layers the jail holds (it reported them once built).
func (j *Jail) Held() []confine.Layer { return slices.Clone(j.held) }

// Warning is what the Landlock layer could not enforce on this kernel, if
// anything.
func (j *Jail) Warning() string { return j.warning }

// Pid is the server's process id.
func (j *Jail) Pid() int { return j.pid }

// start starts a jail server for o and waits at most ready for it to be
// built. The calling thread must outlive the jail (its parent-death
// signal belongs to that thread): Pool starts jails from one thread it
// keeps.
func start(o Options, exe string, ready time.Duration) (*Jail, error) {
	if o.Layers == nil {
		o.Layers = slices.Clone(AllLayers)
	}
	uid, gid := os.Getuid(), os.Getgid()
	// A user that is not root builds its layers in a user namespace of
	// its own; with no layer at all (a test's control) it needs none.
	o.UserNS = uid != 0 && len(o.Layers) > 0
	o.UID, o.GID = uid, gid
	b, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrJail, err)
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrJail, err)
	}
	defer unix.Close(sp[1])
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		unix.Close(sp[0])
		return nil, fmt.Errorf("%w: %w", ErrJail, err)
	}
	defer null.Close()
	pidfd := -1
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true, PidFD: &pidfd, Cloneflags: cloneFlags(&o)}
	if o.UserNS {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		// Kept across the server's exec (ambient): it builds the jail
		// with them, and empties every set before it forks a run.
		attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP, unix.CAP_NET_ADMIN, unix.CAP_SYS_RESOURCE}
	}
	pid, err := syscall.ForkExec(exe, []string{exe, Arg, string(b)}, &syscall.ProcAttr{
		Dir: "/", Env: []string{"PATH=/usr/bin:/bin"},
		Files: []uintptr{null.Fd(), null.Fd(), os.Stderr.Fd(), uintptr(sp[1])}, Sys: attr,
	})
	if err != nil {
		unix.Close(sp[0])
		return nil, fmt.Errorf("%w: start the jail server: %w", ErrJail, err)
	}
	j := &Jail{key: o.Key(), pid: pid, pidfd: pidfd, ctl: sp[0], cgroup: o.Cgroup}
	var m readyMsg
	if err := recvJSON(sp[0], &m, nil, ready); err != nil {
		j.Close()
		return nil, fmt.Errorf("%w: jail server not ready: %w", ErrJail, err)
	}
	if m.Err != "" {
		j.Close()
		return nil, fmt.Errorf("%w: %s", ErrJail, m.Err)
	}
	j.held, j.warning = m.Held, m.Warning
	return j, nil
}

// cloneFlags are the namespaces the server is born in.
func cloneFlags(o *Options) uintptr {
	var f uintptr
	if o.has(confine.LayerView) || o.has(confine.LayerPID) {
		f |= syscall.CLONE_NEWNS
	}
	if o.has(confine.LayerView) {
		f |= syscall.CLONE_NEWIPC
	}
	if o.has(confine.LayerPID) {
		f |= syscall.CLONE_NEWPID
	}
	if o.has(confine.LayerNetwork) && o.Confine.Network == confine.NetworkNone {
		f |= syscall.CLONE_NEWNET
	}
	return f
}

// Request is one run: what execve and a start's working directory give a
// fresh process, and its standard streams.
type Request struct {
	// Argv[0] must be an absolute path (nothing is looked up).
	Argv []string
	Env  []string
	Dir  string
	// Stdin, Stdout and Stderr are the run's descriptors 0, 1 and 2.
	Stdin, Stdout, Stderr int
	// Exec, when >= 0, is the pinned file to execute (by descriptor: what
	// was decided on is what runs); it is the run's descriptor 3. -1 for
	// none.
	Exec int
	// Warm, with Exec, is the argv of a warm process (one waiting in
	// runner.AwaitHandOver) that may take the run instead of a fork and
	// an exec: the server keeps one started from the decided file
	// (warm_linux.go) and hands it the run when the file is the same.
	Warm []string
}

// Proc is a started run.
type Proc struct {
	pid   int
	pidfd int
	sock  int
	warm  bool
}

// Warm says a warm process took the run (Request.Warm).
func (p *Proc) Warm() bool { return p.warm }

// Pid is its process id in the jail's pid namespace.
func (p *Proc) Pid() int { return p.pid }

// ExitFD is readable (poll) once the run has exited: its status is then
// ready for Wait.
func (p *Proc) ExitFD() int { return p.sock }

// PidFD is the run's first process's pidfd.
func (p *Proc) PidFD() int { return p.pidfd }

// Kill kills the run: its first process, which is its pid namespace's
// init, so every process it left dies with it.
func (p *Proc) Kill() error { return unix.PidfdSendSignal(p.pidfd, unix.SIGKILL, nil, 0) }

// Wait waits (at most d; 0 for no bound) for the run's wait status.
func (p *Proc) Wait(d time.Duration) (syscall.WaitStatus, error) {
	var m exitedMsg
	if err := recvJSON(p.sock, &m, nil, d); err != nil {
		return 0, fmt.Errorf("%w: run %d: %w", ErrJail, p.pid, err)
	}
	return syscall.WaitStatus(m.Status), nil
}

// Close releases the run's descriptors (not the run).
func (p *Proc) Close() {
	unix.Close(p.pidfd)
	unix.Close(p.sock)
}

// ErrGone means the jail's server is gone: nothing started.
var ErrGone = errors.New("the jail is gone")

// Start starts r in the jail. An error means nothing ran; a start the
// kernel refused (missing program, permissions) wraps its errno.
func (j *Jail) Start(r Request) (*Proc, error) {
	if len(r.Argv) == 0 {
		return nil, fmt.Errorf("%w: no argv", ErrJail)
	}
	req := request{Argv: r.Argv, Env: r.Env, Dir: r.Dir, Exec: r.Exec >= 0}
	if req.Exec {
		req.Warm = r.Warm
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrJail, err)
	}
	if len(b) > maxMsg {
		return nil, fmt.Errorf("%w: request of %d bytes, at most %d", ErrJail, len(b), maxMsg)
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrJail, err)
	}
	fds := []int{sp[1], r.Stdin, r.Stdout, r.Stderr}
	if r.Exec >= 0 {
		fds = append(fds, r.Exec)
	}
	j.mu.Lock()
	if j.closed {
		err = ErrGone
	} else {
		for {
			err = unix.Sendmsg(j.ctl, b, unix.UnixRights(fds...), nil, unix.MSG_NOSIGNAL)
			if err != unix.EINTR {
				break
			}
		}
	}
	j.mu.Unlock()
	unix.Close(sp[1])
	if err != nil {
		unix.Close(sp[0])
		return nil, fmt.Errorf("%w: %w", ErrGone, err)
	}
	var m startedMsg
	var got []int
	// Bounded: the server forks and answers at once, or is gone (EOF).
	if err := recvJSON(sp[0], &m, &got, 30*time.Second); err != nil {
		closeAll(got)
		unix.Close(sp[0])
		return nil, fmt.Errorf("%w: %w", ErrGone, err)
	}
	if m.Err != "" || len(got) != 1 {
		closeAll(got)
		unix.Close(sp[0])
		if m.Errno != 0 {
			return nil, &os.PathError{Op: "fork/exec", Path: r.Argv[0], Err: syscall.Errno(m.Errno)}
		}
		return nil, fmt.Errorf("%w: start %s: %s", ErrJail, r.Argv[0], m.Err)
	}
	if m.Warm {
		j.handed.Add(1)
	}
	return &Proc{pid: m.Pid, pidfd: got[0], sock: sp[0], warm: m.Warm}, nil
}

// WaitWarm waits at most d for the warm process of argv (Request.Warm) to
// stand ready in the jail: benchmarks and tests measure a hand-over, not
// a start. The server keeps one only once a run asked for it.
func (j *Jail) WaitWarm(argv []string, d time.Duration) error {
	deadline := time.Now().Add(d)
	b, err := json.Marshal(request{Probe: true, Warm: argv})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrJail, err)
	}
	for {
		sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrJail, err)
		}
		j.mu.Lock()
		if j.closed {
			err = ErrGone
		} else {
			for {
				err = unix.Sendmsg(j.ctl, b, unix.UnixRights(sp[1]), nil, unix.MSG_NOSIGNAL)
				if err != unix.EINTR {
					break
				}
			}
		}
		j.mu.Unlock()
		unix.Close(sp[1])
		var m startedMsg
		if err == nil {
			err = recvJSON(sp[0], &m, nil, 5*time.Second)
		}
		unix.Close(sp[0])
		if err != nil {
			return fmt.Errorf("%w: %w", ErrGone, err)
		}
		if m.Warm {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: no warm process ready after %s", ErrJail, d)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Handed is how many runs a warm process took (Request.Warm).
func (j *Jail) Handed() int { return int(j.handed.Load()) }

// Alive reports whether the server still runs.
func (j *Jail) Alive() bool {
	fds := []unix.PollFd{{Fd: int32(j.pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if err != unix.EINTR {
			return err == nil && n == 0
		}
	}
}

// Close ends the jail: the server is killed (and with it, as its pid
// namespace's init, every run still in it) and waited for.
func (j *Jail) Close() {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return
	}
	j.closed = true
	unix.Close(j.ctl)
	j.mu.Unlock()
	_ = unix.PidfdSendSignal(j.pidfd, unix.SIGKILL, nil, 0)
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(j.pid, &ws, 0, nil); err != unix.EINTR {
			break
		}
	}
	unix.Close(j.pidfd)
	if j.cgroup != "" {
		// Empty once the server and its runs are reaped; a moment later
		// on a busy machine.
		for i := 0; i < 50 && os.Remove(j.cgroup) != nil && !os.IsNotExist(os.Remove(j.cgroup)); i++ {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// recvJSON receives one message on sock within d (0: no bound) into v,
// and its descriptors into fds when set.
func recvJSON(sock int, v any, fds *[]int, d time.Duration) error {
	if d > 0 {
		deadline := time.Now().Add(d)
		pfd := []unix.PollFd{{Fd: int32(sock), Events: unix.POLLIN}}
		for {
			left := time.Until(deadline)
			if left <= 0 {
				return fmt.Errorf("no answer after %s", d)
			}
			n, err := unix.Poll(pfd, int(left/time.Millisecond)+1)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			if n > 0 {
				break
			}
		}
	}
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(sock, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		got := rights(oob[:oobn])
		if fds != nil {
			*fds = got
		} else {
			closeAll(got)
		}
		if n == 0 {
			return errors.New("closed")
		}
		return json.Unmarshal(buf[:n], v)
	}
}

// StartRun is Start for the runner (runner.Jail): Spec.Jail is a Jail.
func (j *Jail) StartRun(argv, env []string, dir string, stdio [3]int, exec int) (runner.JailedRun, error) {
	return j.startRun(argv, env, dir, stdio, exec, nil)
}

func (j *Jail) startRun(argv, env []string, dir string, stdio [3]int, exec int, warm []string) (runner.JailedRun, error) {
	p, err := j.Start(Request{Argv: argv, Env: env, Dir: dir, Stdin: stdio[0], Stdout: stdio[1], Stderr: stdio[2], Exec: exec, Warm: warm})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Warmed is j for the runner with every pinned start asking for the warm
// process of argv (Request.Warm): the host's interpreted runs.
func (j *Jail) Warmed(argv []string) *Warmed {
	return &Warmed{Jail: j, argv: slices.Clone(argv)}
}

// Warmed is a Jail whose runs (runner.Jail) ask for a warm process.
type Warmed struct {
	*Jail
	argv []string
}

// WaitWarm is Jail.WaitWarm for w's warm process.
func (w *Warmed) WaitWarm(d time.Duration) error { return w.Jail.WaitWarm(w.argv, d) }

// StartRun is Jail.StartRun asking for the warm process.
func (w *Warmed) StartRun(argv, env []string, dir string, stdio [3]int, exec int) (runner.JailedRun, error) {
	return w.Jail.startRun(argv, env, dir, stdio, exec, w.argv)
}
