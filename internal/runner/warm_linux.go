package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Warm is one warm process (see warm.go): started, waiting for its
// hand-over. Run with Spec.Warm uses it; Close ends one that was never
// used. Its methods are safe for concurrent use.
type Warm struct {
	pid   int
	mu    sync.Mutex // guards the descriptors until one of Run or Close owns them
	pidfd int
	sock  int    // this side of the hand-over socket
	ends  [2]int // stdout, stderr read ends
	taken bool   // Run or Close owns the descriptors
	argv0 string // the program it is (for messages)
}

// Pid is the process's id (and its process group's).
func (w *Warm) Pid() int { return w.pid }

// WarmStarter starts warm processes from one thread it keeps for them: the
// parent-death signal belongs to the forking thread, and this one is never
// lent to another goroutine, so no warm process dies because some other
// goroutine's thread ended. Close lets the thread go once every process it
// started has been waited for (the caller's bookkeeping).
type WarmStarter struct {
	reqs chan warmReq
	once sync.Once
}

type warmReq struct {
	argv, env []string
	reply     chan warmReply
}

type warmReply struct {
	w   *Warm
	err error
}

// NewWarmStarter starts the starter's thread.
func NewWarmStarter() *WarmStarter {
	s := &WarmStarter{reqs: make(chan warmReq)}
	go func() {
		// Locked for good: the goroutine ends with its thread, after every
		// process started here has been waited for (Close).
		runtime.LockOSThread()
		for r := range s.reqs {
			w, err := startWarm(r.argv, r.env)
			r.reply <- warmReply{w, err}
		}
	}()
	return s
}

// Start starts argv (an absolute path) with env, in "/", as a warm
// process, and waits at most ready for it to say it is waiting for its
// hand-over (AwaitHandOver); one that does not is killed.
func (s *WarmStarter) Start(argv, env []string, ready time.Duration) (*Warm, error) {
	reply := make(chan warmReply, 1)
	s.reqs <- warmReq{argv: argv, env: env, reply: reply}
	rep := <-reply
	if rep.err != nil {
		return nil, rep.err
	}
	if err := rep.w.awaitReady(ready); err != nil {
		rep.w.Close()
		return nil, err
	}
	return rep.w, nil
}

// Close ends the starter's thread. Call it only once every warm process
// it started has been used by Run or closed: their parent-death signal
// fires when the thread ends. Start must not be called after.
func (s *WarmStarter) Close() { s.once.Do(func() { close(s.reqs) }) }

// startWarm starts one warm process from the calling (locked) thread.
func startWarm(argv, env []string) (*Warm, error) {
	null, err := devNull()
	if err != nil {
		return nil, err
	}
	w := &Warm{pidfd: -1, sock: -1, ends: [2]int{-1, -1}, argv0: argv[0]}
	var child []int // this side's copies of the child's descriptors
	defer func() {
		for _, fd := range child {
			unix.Close(fd)
		}
	}()
	files := []uintptr{null.Fd()}
	for i := range w.ends {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			w.closeFDs()
			return nil, fmt.Errorf("warm process: %w", err)
		}
		_, _ = unix.FcntlInt(uintptr(p[0]), unix.F_SETPIPE_SZ, pipeSize) // as for a fresh run
		w.ends[i] = p[0]
		child = append(child, p[1])
		files = append(files, uintptr(p[1]))
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		w.closeFDs()
		return nil, fmt.Errorf("warm process: %w", err)
	}
	w.sock = sp[0]
	child = append(child, sp[1])
	// WarmFD, then BaseFD held by the null device until the hand-over
	// puts the base layer there or closes it: nothing the process opens
	// before can take that number.
	files = append(files, uintptr(sp[1]), null.Fd())
	attr := sysProcAttr(false)
	attr.PidFD = &w.pidfd
	pid, _, err := syscall.StartProcess(argv[0], argv, &syscall.ProcAttr{Dir: "/", Env: env, Files: files, Sys: attr})
	if err != nil {
		w.closeFDs()
		return nil, startFailed(argv[0], &os.PathError{Op: "fork/exec", Path: argv[0], Err: err})
	}
	w.pid = pid
	return w, nil
}

// awaitReady waits at most d for the process's ready byte.
func (w *Warm) awaitReady(d time.Duration) error {
	deadline := time.Now().Add(d)
	fds := []unix.PollFd{{Fd: int32(w.sock), Events: unix.POLLIN}}
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("warm process %d: not ready after %s", w.pid, d)
		}
		n, err := unix.Poll(fds, int((left+time.Millisecond-1)/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("warm process %d: %w", w.pid, err)
		}
		if n == 0 {
			continue
		}
		var b [1]byte
		n, err = unix.Read(w.sock, b[:])
		if err == unix.EINTR {
			continue
		}
		if n != 1 {
			return fmt.Errorf("warm process %d: exited before it was ready (%v)", w.pid, err)
		}
		return nil
	}
}

// Alive reports whether the process is still waiting (it has not exited).
func (w *Warm) Alive() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.taken {
		return false
	}
	fds := []unix.PollFd{{Fd: int32(w.pidfd), Events: unix.POLLIN}}
	for {
		// A signal pending at the call (the Go runtime's preemption
		// signal, SIGURG, in a busy process) makes even a poll that
		// does not wait fail with EINTR: that says nothing of the
		// process, and taking it for dead would kill a ready one.
		n, err := unix.Poll(fds, 0)
		if err != unix.EINTR {
			return err == nil && n == 0
		}
	}
}

// Close ends a warm process that was never used: its group is killed and
// it is waited for. It does nothing once Run has taken it.
func (w *Warm) Close() {
	w.mu.Lock()
	if w.taken {
		w.mu.Unlock()
		return
	}
	w.taken = true
	w.mu.Unlock()
	if w.pid > 0 {
		_ = syscall.Kill(-w.pid, syscall.SIGKILL) // its group: it may have forked nothing, but be sure
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(w.pid, &ws, 0, nil); err != syscall.EINTR {
				break
			}
		}
	}
	w.closeFDs()
}

func (w *Warm) closeFDs() {
	for _, fd := range []int{w.pidfd, w.sock, w.ends[0], w.ends[1]} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	w.pidfd, w.sock, w.ends = -1, -1, [2]int{-1, -1}
}

// adopt hands the process's descriptors to a run, once: the pid, its
// pidfd, its output (read into capture) and the hand-over socket.
func (w *Warm) adopt(capture *Capture) (pid, pidfd, sock int, outs *polledOutputs, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.taken {
		return 0, -1, -1, nil, fmt.Errorf("%w: already used or closed", ErrWarmGone)
	}
	w.taken = true
	outs = &polledOutputs{ends: []int{w.ends[0], w.ends[1]}, to: []*Stream{capture.Stdout(), capture.Stderr()}, open: 2}
	pid, pidfd, sock = w.pid, w.pidfd, w.sock
	w.pidfd, w.sock, w.ends = -1, -1, [2]int{-1, -1}
	return pid, pidfd, sock, outs, nil
}

// AwaitHandOver is the warm process's side: it says it is ready, waits for
// its hand-over on WarmFD, closes it (or puts the pinned executable's
// descriptor in its place, ChildFD), puts the base layer of the run's
// confinement, when it came, at BaseFD (close-on-exec; else closes what
// held that number), and applies the hand-over's working
// directory and environment to this process (the environment is replaced
// whole), then returns the argv the process is to run as. The caller must
// run nothing before it returns. ErrNoHandOver means exit quietly.
func AwaitHandOver() ([]string, error) {
	if _, err := unix.Write(WarmFD, []byte{'r'}); err != nil {
		unix.Close(WarmFD)
		return nil, ErrNoHandOver // the runner is gone already
	}
	b, fds, err := readHandOver(WarmFD)
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if err != nil {
		unix.Close(WarmFD)
		return nil, err
	}
	if len(b) == 0 {
		unix.Close(WarmFD)
		return nil, ErrNoHandOver
	}
	var h handOver
	if err := json.Unmarshal(b, &h); err != nil {
		unix.Close(WarmFD)
		return nil, fmt.Errorf("warm process: bad hand-over: %w", err)
	}
	if err := h.place(fds); err != nil {
		unix.Close(WarmFD)
		unix.Close(BaseFD)
		return nil, err
	}
	return h.apply()
}

// place puts the descriptors a hand-over carried (the pinned executable,
// then the base layer, as its fields say) where a fresh start's child has
// them, in one step each (dup3 closes what held the number: the socket,
// the placeholder), so nothing else can take a number in between.
func (h handOver) place(fds []int) error {
	want := 0
	if h.Stdio {
		want += 3
	}
	if h.Pinned {
		want++
	}
	if h.Base {
		want++
	}
	if len(fds) != want {
		return fmt.Errorf("warm process: hand-over with %d descriptors, stdio=%v pinned=%v base=%v", len(fds), h.Stdio, h.Pinned, h.Base)
	}
	if h.Stdio {
		// Not close-on-exec: the run's programs inherit them.
		for i := range 3 {
			if err := unix.Dup3(fds[i], i, 0); err != nil {
				return fmt.Errorf("warm process: descriptor %d: %w", i, err)
			}
		}
		fds = fds[3:]
	}
	if h.Pinned {
		// Not close-on-exec: the launcher execs it by path.
		if err := unix.Dup3(fds[0], ChildFD, 0); err != nil {
			return fmt.Errorf("warm process: pinned executable: %w", err)
		}
		fds = fds[1:]
	} else {
		unix.Close(WarmFD)
	}
	if !h.Base {
		return unix.Close(BaseFD) // the placeholder
	}
	if err := unix.Dup3(fds[0], BaseFD, unix.O_CLOEXEC); err != nil {
		return fmt.Errorf("warm process: base layer: %w", err)
	}
	return nil
}

// readHandOver reads the hand-over message from sock until the runner
// shuts its side, and the descriptors it carries.
func readHandOver(sock int) ([]byte, []int, error) {
	var b []byte
	var fds []int
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(sock, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fds, fmt.Errorf("warm process: read the hand-over: %w", err)
		}
		if oobn > 0 {
			msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
			if err != nil {
				return nil, fds, fmt.Errorf("warm process: hand-over descriptors: %w", err)
			}
			for _, m := range msgs {
				got, err := unix.ParseUnixRights(&m)
				if err != nil {
					return nil, fds, fmt.Errorf("warm process: hand-over descriptors: %w", err)
				}
				fds = append(fds, got...)
			}
		}
		if n == 0 {
			return b, fds, nil
		}
		if b = append(b, buf[:n]...); len(b) > maxHandOver {
			return nil, fds, fmt.Errorf("warm process: hand-over over %d bytes", maxHandOver)
		}
	}
}

// SendJailHandOver hands a run to a warm process a jail's server started
// (internal/jail) on the process's hand-over socket sock, and closes it:
// argv, env and dir as for a fresh start, stdio as its descriptors 0-2
// and, when pinned >= 0, the pinned executable as ChildFD. The process
// holds BaseFD with a placeholder until then, which it closes.
func SendJailHandOver(sock int, argv, env []string, dir string, stdio [3]int, pinned int) error {
	defer unix.Close(sock)
	h := handOver{Argv: argv, Env: env, Dir: dir, Stdio: true, Pinned: pinned >= 0}
	fds := stdio[:]
	if pinned >= 0 {
		fds = append(fds, pinned)
	}
	return writeHandOver(sock, h, fds)
}

// sendHandOver writes ls's argv, environment and working directory to the
// hand-over socket and closes it: the process now runs as ls says.
func sendHandOver(sock int, ls launchSpec) error {
	defer unix.Close(sock)
	h := handOver{Argv: ls.argv, Env: ls.env, Dir: ls.Cwd}
	var fds []int // with the first bytes: the pinned executable, the base layer
	if ls.pinned != nil {
		h.Pinned = true
		fds = append(fds, int(ls.pinned.file.Fd()))
	}
	if ls.base != nil {
		h.Base = true
		fds = append(fds, int(ls.base.Fd()))
	}
	return writeHandOver(sock, h, fds)
}

// writeHandOver writes h, with fds on its first bytes, and shuts the
// writing side of sock: the process reads until then.
func writeHandOver(sock int, h handOver, fds []int) error {
	var rights []byte
	if len(fds) > 0 {
		rights = unix.UnixRights(fds...)
	}
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if len(b) > maxHandOver {
		return fmt.Errorf("%w: hand-over of %d bytes, at most %d", ErrStart, len(b), maxHandOver)
	}
	for len(b) > 0 {
		n, err := unix.SendmsgN(sock, b, rights, nil, unix.MSG_NOSIGNAL)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrWarmGone, err)
		}
		b, rights = b[n:], nil
	}
	if err := unix.Shutdown(sock, unix.SHUT_WR); err != nil && !errors.Is(err, unix.ENOTCONN) {
		return fmt.Errorf("%w: %w", ErrWarmGone, err)
	}
	return nil
}
