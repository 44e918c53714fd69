package jail

import (
	"slices"
	"strconv"
	"syscall"

	"github.com/exechost/exechost/internal/runner"
	"golang.org/x/sys/unix"
)

// A jail's warm process (issue 39: "a text that needs the guarded
// interpreter starts from a warm, already-jailed interpreter"). A run
// whose request names a warm argv (Jail.Warmed: the interpreter's) is a
// start of a large binary whose runtime and packages take milliseconds
// to initialise. The server keeps one such process, forked from the
// jail's thread (so it holds every layer a run holds: the namespaces, a
// pid namespace of its own, Landlock, seccomp, no privilege) and exec'd
// from the very file the last such run was decided on, waiting on a
// private socket (runner.AwaitHandOver). The next run of that argv whose
// decided file is the same file (device and inode, opened again in the
// view as a fresh start's is) is handed to it: argv, environment,
// directory, its standard streams and the pinned file, which is all a
// fresh start's execve would have given it. The process runs that one
// run and exits; a replacement is started once the run is done and no
// request waits. Nothing carries from one run to the next but a process
// image nobody has used. A process that cannot take its hand-over (it
// died) is reaped and the run starts afresh. The warm process belongs to
// its jail: a confinement that changes has another jail (Options.Key), so
// a run never reaches a warm process built under an older one.
type warmSlot struct {
	newPID bool
	wake   [2]int // the waiters poke the loop to refill (a pipe)
	null   int

	// What to keep warm: the argv and the file (an O_PATH descriptor
	// opened in the view, and its identity).
	argv []string
	exe  int
	id   fileID

	cur *warmProc // nil when none stands
}

type fileID struct{ dev, ino uint64 }

type warmProc struct {
	pid, pidfd, sock int
	argv             []string
	id               fileID
	ready            bool // it said it waits (runner.AwaitHandOver's byte)
}

func newWarmSlot(newPID bool) (*warmSlot, error) {
	ws := &warmSlot{newPID: newPID, exe: -1, wake: [2]int{-1, -1}}
	if err := unix.Pipe2(ws.wake[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, err
	}
	null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ws.null = null
	return ws, nil
}

// poke wakes the server's loop (from a probe's goroutine).
func (ws *warmSlot) poke() { _, _ = unix.Write(ws.wake[1], []byte{1}) }

func (ws *warmSlot) drainWake() {
	var b [64]byte
	for {
		if n, err := unix.Read(ws.wake[0], b[:]); n <= 0 || err != nil {
			return
		}
	}
}

func identity(fd int) (fileID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fileID{}, err
	}
	return fileID{dev: st.Dev, ino: st.Ino}, nil
}

// want records that runs of argv started from the file own (a descriptor
// opened in the view) want a warm process; the loop starts it (refill).
func (ws *warmSlot) want(argv []string, own int) {
	id, err := identity(own)
	if err != nil {
		return
	}
	if ws.exe >= 0 && slices.Equal(ws.argv, argv) && ws.id == id {
		return
	}
	dup, err := unix.FcntlInt(uintptr(own), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return
	}
	if ws.exe >= 0 {
		unix.Close(ws.exe)
	}
	ws.argv, ws.exe, ws.id = slices.Clone(argv), dup, id
	if ws.cur != nil && (!slices.Equal(ws.cur.argv, argv) || ws.cur.id != id) {
		ws.drop() // another file (an upgraded binary): it would never be taken
	}
}

// refill starts the warm process wanted, if none stands. A failure leaves
// none: runs start afresh.
func (ws *warmSlot) refill() {
	if ws.exe < 0 || (ws.cur != nil && ws.alive()) {
		return
	}
	ws.drop()
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer unix.Close(sp[1])
	// The warm process's end blocks (its reads wait for the hand-over);
	// this end never does (isReady, a hand-over that fits the buffer).
	if err := unix.SetNonblock(sp[1], false); err != nil {
		unix.Close(sp[0])
		return
	}
	pidfd := -1
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, PidFD: &pidfd}
	if ws.newPID {
		attr.Cloneflags = syscall.CLONE_NEWPID
	}
	// Descriptors as runner.AwaitHandOver expects them: the null device
	// until the hand-over brings the run's streams, the hand-over socket
	// at WarmFD, and at BaseFD the file it is, executed by descriptor
	// (what was decided on is what runs) and then the placeholder the
	// hand-over closes.
	files := []uintptr{uintptr(ws.null), uintptr(ws.null), uintptr(ws.null), uintptr(sp[1]), uintptr(ws.exe)}
	path := "/proc/self/fd/" + strconv.Itoa(runner.BaseFD)
	pid, err := syscall.ForkExec(path, ws.argv, &syscall.ProcAttr{Dir: "/", Env: []string{"PATH=/usr/bin:/bin", "TMPDIR=/tmp"}, Files: files, Sys: attr})
	if err != nil {
		unix.Close(sp[0])
		return
	}
	ws.cur = &warmProc{pid: pid, pidfd: pidfd, sock: sp[0], argv: slices.Clone(ws.argv), id: ws.id}
}

// alive says the standing warm process has not exited.
func (ws *warmSlot) alive() bool {
	fds := []unix.PollFd{{Fd: int32(ws.cur.pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if err != unix.EINTR {
			return err == nil && n == 0
		}
	}
}

// drop kills and reaps the standing warm process, if any.
func (ws *warmSlot) drop() {
	w := ws.cur
	if w == nil {
		return
	}
	ws.cur = nil
	_ = unix.PidfdSendSignal(w.pidfd, unix.SIGKILL, nil, 0)
	var st unix.WaitStatus
	for {
		if _, err := unix.Wait4(w.pid, &st, 0, nil); err != unix.EINTR {
			break
		}
	}
	unix.Close(w.pidfd)
	if w.sock >= 0 {
		unix.Close(w.sock)
	}
}

// take returns the standing warm process if it can take req, whose
// decided file is decided, and the descriptor of that file opened again
// in the view (as a fresh start's), which the hand-over pins; else nil.
// The process is no longer the slot's.
func (ws *warmSlot) take(req request, decided int) (*warmProc, int) {
	w := ws.cur
	if w == nil || !slices.Equal(w.argv, req.Warm) {
		return nil, -1
	}
	if !ws.alive() {
		ws.drop()
		return nil, -1
	}
	if !w.isReady() {
		// Still starting: this run starts afresh rather than wait (the
		// loop serves every run), and the process stays for the next.
		return nil, -1
	}
	own, err := sameFile(req.Argv[0], decided)
	if err != nil {
		return nil, -1 // the fresh start says why
	}
	if id, err := identity(own); err != nil || id != w.id {
		unix.Close(own)
		return nil, -1
	}
	ws.cur = nil
	return w, own
}

// isReady reads, without waiting, the byte a warm process writes once it
// waits for its hand-over; the hand-over closes the socket, and one sent
// before would leave the process nowhere to say it is ready.
func (w *warmProc) isReady() bool {
	if w.ready {
		return true
	}
	var b [1]byte
	for {
		n, err := unix.Read(w.sock, b[:])
		if err == unix.EINTR {
			continue
		}
		w.ready = n == 1
		return w.ready
	}
}

// handOver hands req (fds as startRun's: its socket, its streams, the
// decided file) to w with own pinned, and answers as a fresh start does.
// It reports false when w could not take it (gone): nothing of the run
// started, and the caller starts it afresh.
func handOver(req request, fds []int, w *warmProc, own int, ws *warmSlot) (running, bool) {
	err := runner.SendJailHandOver(w.sock, req.Argv, req.Env, req.Dir, [3]int{fds[1], fds[2], fds[3]}, own)
	unix.Close(own)
	if err != nil {
		w.sock = -1 // closed by SendJailHandOver
		ws.cur = w
		ws.drop()
		return running{}, false
	}
	sock := fds[0]
	closeAll(fds[1:])
	err = reply(sock, startedMsg{Pid: w.pid, Warm: true}, []int{w.pidfd})
	return running{pid: w.pid, pidfd: w.pidfd, sock: sock, sent: err, warm: true}, true
}

// probe answers on sock whether a warm process of argv is ready, waiting
// at most a second on a goroutine (the loop serves runs meanwhile); it
// starts one if one is wanted and none stands.
func (ws *warmSlot) probe(argv []string, sock int) {
	w := ws.cur
	if w == nil || !slices.Equal(w.argv, argv) {
		ws.poke()
		reply(sock, startedMsg{}, nil)
		unix.Close(sock)
		return
	}
	if w.ready {
		reply(sock, startedMsg{Warm: true}, nil)
		unix.Close(sock)
		return
	}
	// A copy: the loop may hand the process over (and close its socket)
	// while this waits. Polled, never read: the loop reads the byte.
	dup, err := unix.FcntlInt(uintptr(w.sock), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		reply(sock, startedMsg{}, nil)
		unix.Close(sock)
		return
	}
	go func() {
		fds := []unix.PollFd{{Fd: int32(dup), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 1000)
		reply(sock, startedMsg{Warm: err == nil && n > 0}, nil)
		unix.Close(sock)
		unix.Close(dup)
	}()
}
