package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// polledLauncher is the launcher New prefers to launchWithGoroutines: one
// thread waits for output and exit in poll(2), with no goroutine hand-offs
// between the process's exit and the result (New(Portable()) opts out).
func polledLauncher() launcher { return launchIfPidfds }

// pidfdsWork says whether pidfd_open answers: on kernels with pidfds
// (5.3+) where nothing (a seccomp profile) forbids them. os/exec makes the
// same check for its own pidfds. It is asked on the first run, not at
// package init, which every start of the binary pays.
var pidfdsWork = sync.OnceValue(func() bool {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
})

// launchIfPidfds is launchPolled where pidfds work, else the portable
// launcher.
func launchIfPidfds(ctx context.Context, ls launchSpec) (ran, error) {
	if !pidfdsWork() {
		return launchWithGoroutines(ctx, ls)
	}
	return launchPolled(ctx, ls)
}

// devNull is the null device, opened once: every command's stdin.
var devNull = sync.OnceValues(func() (*os.File, error) {
	return os.OpenFile(os.DevNull, os.O_RDONLY, 0)
})

// launchPolled starts ls with the process's pidfd and watches it and the
// read ends of its output from this goroutine alone, in poll(2) on a
// pinned thread: output is read as it comes, the exit is seen on the
// pidfd, and nothing is handed between goroutines, whose every wake-up of
// an idle thread costs tens of microseconds on a virtual machine. The
// timeout and ctx kill the group from context.AfterFunc; the kill ends the
// process, which the loop then sees exit.
func launchPolled(ctx context.Context, ls launchSpec) (ran, error) {
	var r ran
	if ls.Warm != nil {
		return launchWarm(ctx, ls)
	}
	if ls.Jail != nil {
		return launchJailed(ctx, ls)
	}
	argv0 := ls.execPath()
	if !strings.Contains(argv0, "/") {
		// As os/exec does: a bare name is looked up in the runner's own
		// PATH (the host engine always passes a resolved path).
		p, err := exec.LookPath(argv0)
		if err != nil {
			return r, startFailed(argv0, err)
		}
		argv0 = p
	}
	outs, err := openPolledOutputs(ls)
	if err != nil {
		return r, fmt.Errorf("run %q: open output: %w", ls.argv[0], err)
	}
	defer outs.close()

	pidfd := -1
	attr := sysProcAttr(ls.PTY)
	attr.PidFD = &pidfd
	// The parent-death signal belongs to the forking thread: keep this
	// goroutine on it until the process is reaped.
	unlock := lockThread()
	defer unlock()
	start := time.Now()
	files := outs.child
	for _, f := range ls.childFiles() {
		files = append(files[:len(files):len(files)], f.Fd()) // a nil file's is -1: closed in the child
	}
	var pid int
	release, err := ls.start(func() error {
		var err error
		pid, _, err = syscall.StartProcess(argv0, ls.argv, &syscall.ProcAttr{Dir: ls.Cwd, Env: ls.env, Files: files, Sys: attr})
		if err != nil {
			return &os.PathError{Op: "fork/exec", Path: argv0, Err: err}
		}
		return nil
	})
	outs.closeChild()
	if err != nil {
		if errors.Is(err, errConfine) {
			return r, err
		}
		return r, startFailed(ls.argv[0], err)
	}
	defer release() // after superviseStarted has reaped it: see startConfined
	defer unix.Close(pidfd)
	return superviseStarted(ctx, ls, start, pid, pidfd, outs, nil, nil)
}

// launchJailed starts ls in its jail (Spec.Jail): the jail's server forks
// and execs it (the pinned file by its descriptor), with the run's output
// pipes as its stdout and stderr, and it is supervised as a fresh start
// is, its kill being the jail's (the whole run).
func launchJailed(ctx context.Context, ls launchSpec) (ran, error) {
	argv0 := ls.argv[0]
	if !strings.HasPrefix(argv0, "/") {
		p, err := exec.LookPath(argv0)
		if err != nil {
			return ran{}, startFailed(argv0, err)
		}
		argv0 = p
	}
	outs, err := openPolledOutputs(ls)
	if err != nil {
		return ran{}, fmt.Errorf("run %q: open output: %w", ls.argv[0], err)
	}
	defer outs.close()
	execFD := -1
	if ls.pinned != nil {
		execFD = int(ls.pinned.file.Fd())
	}
	argv := append([]string{argv0}, ls.argv[1:]...)
	unlock := lockThread() // the poll loop stays on one thread
	defer unlock()
	start := time.Now()
	jr, err := ls.Jail.StartRun(argv, ls.env, ls.Cwd, [3]int{int(outs.child[0]), int(outs.child[1]), int(outs.child[2])}, execFD)
	outs.closeChild()
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return ran{}, startFailed(ls.argv[0], err)
		}
		return ran{}, fmt.Errorf("%w: %w", errConfine, err)
	}
	defer jr.Close()
	return superviseStarted(ctx, ls, start, jr.Pid(), jr.PidFD(), outs, nil, jr)
}

// launchWarm runs ls in its warm process (Spec.Warm): the process started
// earlier is adopted, tracked by the reaper, handed ls, and supervised as
// a fresh start is.
func launchWarm(ctx context.Context, ls launchSpec) (ran, error) {
	pid, pidfd, sock, outs, err := ls.Warm.adopt(ls.capture)
	if err != nil {
		return ran{}, err
	}
	defer outs.close()
	defer unix.Close(pidfd)
	sent := false
	defer func() {
		if !sent { // the run failed before its hand-over
			unix.Close(sock)
		}
	}()
	// Not for the parent-death signal (the warm starter's thread forked
	// it) but as for a fresh start: the poll loop stays on one thread.
	unlock := lockThread()
	defer unlock()
	return superviseStarted(ctx, ls, time.Now(), pid, pidfd, outs, func() error {
		sent = true
		return sendHandOver(sock, ls) // closes sock
	}, nil)
}

// superviseStarted watches the started process pid until it has exited
// and its output is drained (see launchPolled). handOver, when set, is
// called once the group is tracked by the reaper and before anything else:
// the warm process's hand-over, after which it runs the command; an error
// from it kills the process and is returned. jailed, when set, is the
// run a jail started (pid is then its pid in the jail): it is killed as
// the jail kills (its whole pid namespace), needs no reaper (it dies
// with the jail's server, which dies with this process), and its status
// comes from the jail.
func superviseStarted(ctx context.Context, ls launchSpec, start time.Time, pid, pidfd int, outs *polledOutputs, handOver func() error, jailed JailedRun) (r ran, err error) {
	r.pid = pid
	var tree killer = procTree{pgid: pid}
	if jailed != nil {
		tree = jailKiller{jailed}
	}
	// The leader is reaped last, once nothing can signal its group any
	// more: until then it is at worst a zombie, its pid — the group's id —
	// cannot be reused, and every kill reaches this run's group and no
	// other (a kill after the reap could hit an unrelated group that got
	// the id meanwhile).
	// exited is set, under mu, once the leader's exit is seen: from then on
	// the run has ended, and the timeout no longer kills.
	var mu sync.Mutex // guards exited and killedBy
	exited := false
	var killedBy error
	markExited := func() error {
		mu.Lock()
		defer mu.Unlock()
		exited = true
		return killedBy
	}
	exitSeen := false
	untrack := func() {}
	defer func() {
		if !exitSeen { // only on a failure below: never leave a zombie
			markExited()
			tree.kill()
		}
		// Untracked first: the reaper must not kill the group's id once
		// it may be reused.
		untrack()
		if hook := ls.beforeReap; hook != nil {
			hook(pid)
		}
		var ws syscall.WaitStatus
		var err error
		if jailed != nil {
			if !exitSeen {
				// Killed above; its status follows at once.
				_ = jailed.Kill()
			}
			ws, err = jailed.Wait(jailStatusWait)
		} else {
			for {
				if _, err = syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
					break
				}
			}
		}
		switch {
		case !exitSeen:
		case err != nil:
			r.lost = err
		default:
			r.code, r.why = waitStatus(ws)
		}
	}()
	if jailed == nil {
		if untrack, err = reaperTrack(pid); err != nil {
			untrack = func() {}
			return r, err
		}
	}
	if ls.tracked != nil {
		ls.tracked(pid)
	}
	if handOver != nil {
		if err := handOver(); err != nil {
			return r, err
		}
		start = time.Now() // the run starts with its hand-over
	}

	// Armed once the process runs: arming a timer wakes an idle thread,
	// which costs less while the command runs than before it starts.
	ctx, cancel := ls.armTimeout(ctx)
	defer cancel()
	stopKill := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !exited {
			killedBy = ctx.Err()
			tree.kill()
		}
	})
	defer stopKill()
	notice := startNotice(ls)
	defer notice.now() // the process started, whatever ends the supervision

	bp := copyBufs.Get().(*[copyBufSize]byte)
	defer copyBufs.Put(bp)
	buf := bp[:]
	fds := append(outs.pollFDs(), unix.PollFd{Fd: int32(pidfd), Events: unix.POLLIN})
	exit := &fds[len(fds)-1]
	var graceEnd time.Time
	for {
		wait := notice.wait() // milliseconds; -1: until something happens
		if exit.Fd < 0 {
			if outs.open == 0 {
				break
			}
			left := time.Until(graceEnd)
			if left <= 0 {
				// Something the command left behind still holds its
				// output: what it writes from now on is lost.
				r.stragglers = true
				tree.kill()
				break
			}
			wait = int((left + time.Millisecond - 1) / time.Millisecond) // the notice went with the exit
		}
		if _, err := unix.Poll(fds, wait); err != nil {
			if err == unix.EINTR {
				continue
			}
			return r, fmt.Errorf("run %q: poll: %w", ls.argv[0], err)
		}
		for i := range fds[:len(fds)-1] {
			if fds[i].Revents != 0 {
				outs.read(i, &fds[i], buf)
			}
		}
		if exit.Fd >= 0 && exit.Revents != 0 {
			// The pidfd is readable: the leader has exited. It stays a
			// zombie until the deferred reap.
			r.killedBy = markExited()
			exitSeen = true
			notice.now()
			r.duration = time.Since(start)
			if r.killedBy != nil {
				// Anything forked while the kill was in flight dies now.
				tree.kill()
			}
			exit.Fd = -1 // poll ignores it from now on
			graceEnd = time.Now().Add(OutputGrace)
		}
	}
	return r, nil
}

// polledOutputs are the descriptors of a polled run's output: the read
// ends (or the pty's master) this process reads, and the files the child
// gets as stdin, stdout and stderr.
type polledOutputs struct {
	ends  []int      // read ends; -1 once closed
	to    []*Stream  // to[i] receives ends[i]
	child []uintptr  // the child's descriptors 0, 1, 2
	owned []*os.File // this side's files to close after the start
	ptmx  *os.File   // the pty's master (ends[0] is its descriptor)
	open  int        // read ends not yet at end of file
}

// openPolledOutputs makes two pipes (stdout, stderr; stdin is the null
// device) or a pty. The pipes are plain blocking descriptors, read only
// when poll says so, never registered with the Go runtime's poller.
func openPolledOutputs(ls launchSpec) (*polledOutputs, error) {
	o := &polledOutputs{}
	if ls.PTY {
		ptmx, tty, err := pty.Open()
		if err != nil {
			return nil, fmt.Errorf("open pty: %w", err)
		}
		if err := pty.Setsize(ptmx, &ptySize); err != nil {
			ptmx.Close()
			tty.Close()
			return nil, fmt.Errorf("size pty: %w", err)
		}
		o.ptmx, o.owned = ptmx, []*os.File{tty}
		o.ends, o.to = []int{int(ptmx.Fd())}, []*Stream{ls.capture.Stdout()}
		t := tty.Fd()
		o.child = []uintptr{t, t, t}
		o.open = 1
		return o, nil
	}
	null, err := devNull()
	if err != nil {
		return nil, err
	}
	o.child = []uintptr{null.Fd()}
	for _, s := range []*Stream{ls.capture.Stdout(), ls.capture.Stderr()} {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			o.closeChild()
			o.close()
			return nil, err
		}
		// Bigger than the default, as tunePipe does for the portable
		// launcher; best effort.
		_, _ = unix.FcntlInt(uintptr(p[0]), unix.F_SETPIPE_SZ, pipeSize)
		o.ends, o.to = append(o.ends, p[0]), append(o.to, s)
		w := os.NewFile(uintptr(p[1]), "|1")
		o.owned = append(o.owned, w)
		o.child = append(o.child, w.Fd())
		o.open++
	}
	return o, nil
}

// pollFDs returns the poll set of the read ends.
func (o *polledOutputs) pollFDs() []unix.PollFd {
	fds := make([]unix.PollFd, len(o.ends), len(o.ends)+1)
	for i, fd := range o.ends {
		fds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	}
	return fds
}

// read reads what read end i holds into its stream, once; at end of file
// (or EIO, which a pty's master returns once the last terminal holder
// closed it) it stops polling it.
func (o *polledOutputs) read(i int, pfd *unix.PollFd, buf []byte) {
	n, err := unix.Read(o.ends[i], buf)
	if n > 0 {
		o.to[i].Write(buf[:n]) // never fails
		return
	}
	if err == unix.EINTR || err == unix.EAGAIN {
		return
	}
	pfd.Fd = -1
	o.open--
}

// closeChild closes this side's copies of the child's descriptors, so that
// end of file arrives once the child's side closes.
func (o *polledOutputs) closeChild() {
	for _, f := range o.owned {
		f.Close()
	}
	o.owned = nil
}

// close closes the read ends.
func (o *polledOutputs) close() {
	if o.ptmx != nil {
		o.ptmx.Close()
		o.ptmx = nil
		o.ends = nil
	}
	for i, fd := range o.ends {
		if fd >= 0 {
			unix.Close(fd)
			o.ends[i] = -1
		}
	}
}

// jailStatusWait bounds the wait for a jailed run's status once its exit
// was seen (or it was killed): the jail sends it as soon as it reaps it.
const jailStatusWait = 10 * time.Second

// killer kills a run: its process group, or a jailed run's pid namespace.
type killer interface{ kill() }

// jailKiller kills a jailed run: its first process, the init of its pid
// namespace, so that every process it left dies too.
type jailKiller struct{ r JailedRun }

func (k jailKiller) kill() { _ = k.r.Kill() }
