package jail

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/reexec"
	"golang.org/x/sys/unix"
)

// The server is an early entry point: it runs from this package's init,
// before the inits of the binary's heavier packages (the Kubernetes
// types, the OpenTelemetry SDK, the CLI), which it never uses and whose
// heap and pages it would otherwise keep for its whole life.
func init() { reexec.RegisterEarly(Arg, serve) }

// ctlFD is the server's control socket (SOCK_SEQPACKET): it says once
// that it is ready (readyMsg), then receives one request per run.
const ctlFD = 3

// maxMsg bounds a request (argv and environment).
const maxMsg = 1 << 20

// readyMsg is the server's first message: the layers it holds, or why it
// could not build its jail.
type readyMsg struct {
	Held    []confine.Layer `json:"held,omitempty"`
	Warning string          `json:"warning,omitempty"`
	Err     string          `json:"err,omitempty"`
}

// request is one run, with descriptors (SCM_RIGHTS): the run's reply
// socket, its stdin, stdout and stderr, and, when Exec, the pinned file
// to execute (it becomes the run's descriptor 3, as runner.ChildFD).
type request struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir,omitempty"`
	Exec bool     `json:"exec,omitempty"`
	// Warm, with Exec, is the argv of a warm process (runner.AwaitHandOver)
	// that can take this run by a hand-over: the server keeps one such
	// process started ahead of need from the same file (warm.go).
	Warm []string `json:"warm,omitempty"`
	// Probe asks, with only a reply socket, whether a warm process of
	// Warm stands ready (within a second); nothing runs.
	Probe bool `json:"probe,omitempty"`
}

// startedMsg is the first reply on a run's socket: its pid in the jail
// (with its pidfd) or why it did not start; exitedMsg the second.
type startedMsg struct {
	Pid   int    `json:"pid,omitempty"`
	Errno int    `json:"errno,omitempty"`
	Err   string `json:"err,omitempty"`
	// Warm says a warm process took the run (no fork, no exec).
	Warm bool `json:"warm,omitempty"`
}

type exitedMsg struct {
	Status uint32 `json:"status"`
}

// serve is the server's entry point: build the jail on this process and
// its locked thread, say so, then fork each run from that thread.
func serve() {
	args := reexec.Args(1, 1, "OPTIONS")
	runtime.LockOSThread() // never unlocked: every run is forked from this thread
	// Inherited without close-on-exec: a run must never hold the
	// control socket (it could take other runs' requests and files).
	unix.CloseOnExec(ctlFD)
	var o Options
	if err := json.Unmarshal([]byte(args[0]), &o); err != nil {
		reply(ctlFD, readyMsg{Err: "bad options: " + err.Error()}, nil)
		os.Exit(2)
	}
	held, warning, err := build(&o)
	if err != nil {
		reply(ctlFD, readyMsg{Err: err.Error()}, nil)
		os.Exit(1)
	}
	if err := reply(ctlFD, readyMsg{Held: held, Warning: warning}, nil); err != nil {
		os.Exit(1)
	}
	newPID := slices.Contains(held, confine.LayerPID)
	// One thread does all the server's work (runs are forked from it and
	// waited for in its poll), so one P: with more, the runtime's monitor
	// polls every 20 µs for 10 ms after each wake-up before it sleeps
	// again, which cost more CPU than the run's own fork on a machine
	// whose context switches are dear (issue 39).
	runtime.GOMAXPROCS(1)
	buf := settle()
	oob := make([]byte, unix.CmsgSpace(5*4))
	ws, err := newWarmSlot(newPID)
	if err != nil {
		os.Exit(1)
	}
	pfd := []unix.PollFd{{Fd: ctlFD, Events: unix.POLLIN}, {Fd: int32(ws.wake[0]), Events: unix.POLLIN}}
	var live []running // runs not yet exited, polled by their pidfds
	refill := false    // a run that asked for a warm process is done
	for {
		// A warm process is started here, on the jail's thread, once no
		// request waits: a start of this binary takes a core for
		// milliseconds, which the runs in flight should have.
		wait := -1
		if refill {
			wait = 0
		}
		pfd = pfd[:2]
		for _, r := range live {
			pfd = append(pfd, unix.PollFd{Fd: int32(r.pidfd), Events: unix.POLLIN})
		}
		n, err := unix.Poll(pfd, wait)
		if err != nil && err != unix.EINTR {
			os.Exit(1)
		}
		if n > 0 {
			kept := live[:0]
			for i, r := range live {
				if pfd[2+i].Revents != 0 && r.reap() {
					refill = refill || r.warm
					continue
				}
				kept = append(kept, r)
			}
			clear(live[len(kept):])
			live = kept
			if pfd[1].Revents != 0 {
				ws.drainWake()
				refill = true
			}
		}
		if n <= 0 || pfd[0].Revents == 0 {
			if refill && err == nil {
				ws.refill()
				refill = false
			}
			continue
		}
		n, oobn, _, _, err := unix.Recvmsg(ctlFD, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err != nil || n == 0 {
			os.Exit(0) // the host closed the jail (or is gone)
		}
		fds := rights(oob[:oobn])
		var req request
		err = json.Unmarshal(buf[:n], &req)
		if err == nil && req.Probe && len(fds) == 1 {
			ws.probe(req.Warm, fds[0])
			continue
		}
		if err != nil || len(fds) < 4 || len(req.Argv) == 0 {
			closeAll(fds)
			continue
		}
		if r, ok := startRun(req, fds, newPID, ws); ok {
			live = append(live, r)
		}
	}
}

// settle lowers the footprint of the server, which idles between runs
// for as long as its jail stands (issue 39: idle PSS), and returns the
// request buffer. What setup allocated goes back to the kernel; the
// buffer is fresh anonymous memory, so only the pages requests write are
// ever resident (a heap buffer of reused memory is zeroed whole); and
// the binary's read-only mappings are dropped from this process's page
// tables (MADV_DONTNEED: the pages stay in the page cache, shared with the
// daemon that runs the same binary), so it maps again only the code and
// data its loop touches instead of every page setup and the kernel's
// fault-around brought in. A failure here costs memory, never safety.
func settle() []byte {
	debug.FreeOSMemory()
	if exe, err := os.Readlink("/proc/self/exe"); err == nil {
		if maps, err := os.ReadFile("/proc/self/maps"); err == nil {
			for _, line := range strings.Split(string(maps), "\n") {
				// start-end perms offset dev inode path
				f := strings.Fields(line)
				if len(f) < 6 || f[5] != exe || (f[1] != "r-xp" && f[1] != "r--p") {
					continue
				}
				lo, hi, ok := strings.Cut(f[0], "-")
				start, err1 := strconv.ParseUint(lo, 16, 64)
				end, err2 := strconv.ParseUint(hi, 16, 64)
				if ok && err1 == nil && err2 == nil && end > start {
					unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_DONTNEED)
				}
			}
		}
	}
	buf, err := unix.Mmap(-1, 0, maxMsg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]byte, maxMsg)
	}
	return buf
}

// build builds o's layers in order (AllLayers) and returns those held.
func build(o *Options) (held []confine.Layer, warning string, err error) {
	if o.has(confine.LayerLimits) {
		cg := false
		if o.Cgroup != "" {
			cg = joinCgroup(o.Cgroup, o.procs()) == nil
		}
		if err := setLimits(o, cg); err != nil {
			return nil, "", err
		}
		// RLIMIT_NPROC does not bound root: without a cgroup, root's
		// jail has no process bound, and says so.
		if cg || os.Getuid() != 0 {
			held = append(held, confine.LayerLimits)
		}
	}
	if o.has(confine.LayerNetwork) && o.Confine.Network == confine.NetworkNone {
		if err := loopbackUp(); err != nil {
			return nil, "", err
		}
		if o.Egress != nil {
			if err := startEgressRelay(o); err != nil {
				return nil, "", err
			}
		}
		held = append(held, confine.LayerNetwork)
	}
	pid := o.has(confine.LayerPID)
	switch {
	case o.has(confine.LayerView):
		if err := buildView(o, pid); err != nil {
			return nil, "", fmt.Errorf("view: %w", err)
		}
		held = append(held, confine.LayerView)
	case pid:
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return nil, "", fmt.Errorf("pid: %w", err)
		}
		if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return nil, "", fmt.Errorf("pid: fresh /proc: %w", err)
		}
	}
	if pid {
		held = append(held, confine.LayerPID)
	}
	// Nothing a run does reaches this process by ptrace or /proc.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return nil, "", fmt.Errorf("not dumpable: %w", err)
	}
	if o.has(confine.LayerLandlock) && confine.KernelABI() > 0 {
		c := landlockOf(o)
		w, err := confine.ApplyThread(&c, confine.KernelABI())
		if err != nil {
			return nil, "", fmt.Errorf("landlock: %w", err)
		}
		warning = w
		held = append(held, confine.LayerLandlock)
	}
	if o.has(confine.LayerNoPrivilege) {
		if err := dropPrivilege(); err != nil {
			return nil, "", fmt.Errorf("no-privilege: %w", err)
		}
		held = append(held, confine.LayerNoPrivilege)
	}
	if o.has(confine.LayerSeccomp) {
		if err := loadSeccomp(); err != nil {
			return nil, "", err
		}
		held = append(held, confine.LayerSeccomp)
	}
	return held, warning, nil
}

// landlockOf is the confinement the Landlock layer applies: o's, with the
// hidden set kept out as the protected set is, the view's private /tmp
// writable, and no limits (the limits layer owns them).
func landlockOf(o *Options) confine.Confinement {
	c := o.Confine
	c.Protected = append(slices.Clone(c.Protected), c.Hidden...)
	if o.has(confine.LayerView) && !slices.Contains(c.Writable, "/") {
		c.Protected = outsideView(o, c.Protected)
		if !slices.Contains(c.Writable, "/tmp") {
			c.Writable = append(slices.Clone(c.Writable), "/tmp")
		}
	}
	c.Limits = confine.Limits{}
	c.Base, c.BaseFor, c.Exec = 0, "", ""
	egressLandlock(o, &c)
	return c
}

// outsideView drops from protected the paths beneath the host's /tmp that
// the view does not show (neither a writable root nor a readable entry
// brings them back into its private /tmp): they are not there to reach,
// and a rule around them would keep the Landlock layer from granting the
// private /tmp itself (a protected path's directories get rules only for
// their entries), so a run could not create anything there.
func outsideView(o *Options, protected []string) []string {
	shown := slices.Concat(o.Confine.Writable, o.Readable)
	return slices.DeleteFunc(slices.Clone(protected), func(p string) bool {
		if !strings.HasPrefix(p, "/tmp/") {
			return false
		}
		return !slices.ContainsFunc(shown, func(r string) bool {
			return r == p || strings.HasPrefix(p, r+"/") || strings.HasPrefix(r, p+"/")
		})
	})
}

// startRun forks req from this (the jail's) thread and answers on its
// socket with its pid and pidfd; the loop answers its wait status once it
// has exited (running.reap). false: it did not start (the socket said why).
func startRun(req request, fds []int, newPID bool, ws *warmSlot) (running, bool) {
	sock := fds[0]
	files := []uintptr{uintptr(fds[1]), uintptr(fds[2]), uintptr(fds[3])}
	path := req.Argv[0]
	warm := req.Exec && len(fds) > 4 && len(req.Warm) > 0
	if warm {
		if w, own := ws.take(req, fds[4]); w != nil {
			if r, ok := handOver(req, fds, w, own, ws); ok {
				return r, true
			}
		}
	}
	if req.Exec && len(fds) > 4 {
		// The file decided on, opened again where the run finds it in
		// the view (its Landlock rules are the view's) and started only
		// if it is the same file.
		own, err := sameFile(req.Argv[0], fds[4])
		if err != nil {
			reply(sock, startedMsg{Err: err.Error(), Errno: int(errnoOf(err))}, nil)
			closeAll(fds)
			return running{}, false
		}
		fds = append(fds, own)
		files = append(files, uintptr(own))
		path = "/proc/self/fd/3"
	}
	pidfd := -1
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, PidFD: &pidfd}
	if newPID {
		attr.Cloneflags = syscall.CLONE_NEWPID
	}
	pid, err := syscall.ForkExec(path, req.Argv, &syscall.ProcAttr{Dir: req.Dir, Env: req.Env, Files: files, Sys: attr})
	if warm && err == nil {
		// The next run of this kind is handed to a warm process started
		// from the same file (once this one is done: reap refills).
		ws.want(req.Warm, fds[len(fds)-1])
	}
	closeAll(fds[1:])
	if err != nil {
		m := startedMsg{Err: err.Error()}
		if en, ok := err.(syscall.Errno); ok {
			m.Errno = int(en)
		}
		reply(sock, m, nil)
		unix.Close(sock)
		return running{}, false
	}
	err = reply(sock, startedMsg{Pid: pid}, []int{pidfd})
	return running{pid: pid, pidfd: pidfd, sock: sock, sent: err, warm: warm}, true
}

// running is a run the loop waits for: its pidfd polls readable once it
// has exited, and then its wait status goes on sock (unless sending its
// start failed, sent). warm says it asked for a warm process, which the
// loop starts once it is done.
type running struct {
	pid, pidfd, sock int
	sent             error
	warm             bool
}

// reap answers r's wait status and releases its descriptors once it has
// exited; false means it has not (a spurious wake-up).
func (r running) reap() bool {
	var st unix.WaitStatus
	var got int
	var err error
	for {
		if got, err = unix.Wait4(r.pid, &st, unix.WNOHANG, nil); err != unix.EINTR {
			break
		}
	}
	if err == nil && got == 0 {
		return false
	}
	if err == nil && r.sent == nil {
		reply(r.sock, exitedMsg{Status: uint32(st)}, nil)
	}
	// Without a status (never: it is this process's child), the closed
	// socket tells the host the run's end is unknown.
	unix.Close(r.sock)
	unix.Close(r.pidfd)
	return true
}

// reply sends v (and fds) as one message on sock.
func reply(sock int, v any, fds []int) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	for {
		err = unix.Sendmsg(sock, b, oob, nil, unix.MSG_NOSIGNAL)
		if err != unix.EINTR {
			return err
		}
	}
}

// rights are the descriptors a message's control data carries.
func rights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if got, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

func closeAll(fds []int) {
	for _, fd := range fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// sameFile opens path in the jail's view and returns its descriptor if it
// is the file decided descriptor holds (same device and inode: a bind
// mount shows the same file), else an error: a file swapped in after the
// decision, or one the view does not show, never runs.
func sameFile(path string, decided int) (int, error) {
	var want, got unix.Stat_t
	if err := unix.Fstat(decided, &want); err != nil {
		return -1, err
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Fstat(fd, &got); err != nil || got.Dev != want.Dev || got.Ino != want.Ino {
		unix.Close(fd)
		return -1, fmt.Errorf("%s in the jail is not the file decided on: %w", path, unix.EACCES)
	}
	return fd, nil
}

// errnoOf is err's errno, or EACCES.
func errnoOf(err error) syscall.Errno {
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	return syscall.EACCES
}
