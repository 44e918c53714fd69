package agent

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/exechost/exechost/internal/reexec"
	"github.com/exechost/exechost/internal/runner"
)

// A binary that imports this package (exechost itself, a test binary
// whose TestMain calls reexec.Init, the benchmark) becomes the agent when
// a backend starts it with Flag.
func init() {
	reexec.Register(Flag, func() {
		reexec.Args(0, 0, "")
		os.Exit(Main(os.Stdin, os.Stdout, os.Stderr))
	})
}

// dialTimeout bounds connecting to the gateway's socket.
const dialTimeout = 10 * time.Second

// spareThreads is how many OS threads the agent creates at start and keeps
// idle. The Go runtime reuses idle threads before creating new ones, and a
// fork bomb inside the sandbox can exhaust the pids limit (which counts
// threads): a runtime that cannot create a thread aborts, so the agent
// makes the few it needs while it still can.
const spareThreads = 6

// Main serves the gateway on in/out until in ends or a frame fails
// authentication, and returns the process exit status. Diagnostics go to
// errOut (never to out, which is the channel).
func Main(in io.Reader, out io.Writer, errOut io.Writer) int {
	if err := newServer(out).serve(in); err != nil {
		fmt.Fprintf(errOut, "exechost sandbox agent: %v\n", err)
		return 1
	}
	return 0
}

// server is the agent's state.
type server struct {
	out io.Writer
	wmu sync.Mutex
	env []string

	// grace is how long background processes may hold a command's output
	// after its leader exits (runner.OutputGrace; tests lengthen it).
	grace time.Duration
	// beforeReap, when set, is called with a command's leader just before
	// the agent reaps it, after the last kill of its group (tests).
	beforeReap func(pid int)

	// kick asks the reap loop for a pass without a SIGCHLD (a kept leader
	// was reaped, and zombies behind it may be waitable now).
	kick chan struct{}

	mu      sync.Mutex
	leaders map[int]*leader     // kept command leaders by pid, until reaped
	running map[uint64]*command // by request id
}

// leader is a command's process-group leader. The agent leaves it a
// zombie after its exit, until the command's last group kill: while it is
// a zombie its pid, the group's id, cannot be reused, so a kill of the
// group reaches that command's processes and no other command's.
type leader struct {
	exited chan struct{} // closed by the reap loop when the leader exits
	seen   bool          // exited has been closed; guarded by server.mu
}

// command is one forked command.
type command struct {
	pgid   int
	killed chan struct{} // closed by a kill request
	once   sync.Once
}

// newServer returns an agent that writes its replies to out.
func newServer(out io.Writer) *server {
	return &server{
		out: out, env: os.Environ(), grace: runner.OutputGrace,
		kick:    make(chan struct{}, 1),
		leaders: map[int]*leader{}, running: map[uint64]*command{},
	}
}

// serve reads requests from in until it ends.
func (s *server) serve(in io.Reader) error {
	// Same user as the commands, so without this they could open
	// /proc/<agent>/fd/0 and write frames, read its memory or ptrace it.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("set non-dumpable: %w", err)
	}
	// Nothing of the agent's own descriptors beyond the channel reaches a
	// command (ForkExec gives each exactly stdin, stdout and stderr).
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("close inherited descriptors: %w", err)
	}
	warmThreads()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	go s.reapLoop(sigs)
	// The gateway ends the agent by closing its input, never by a signal.
	// Catching (and dropping) the ones that would make the Go runtime exit
	// keeps a command from ending its own sandbox by accident (a pid 1
	// without a handler would be immune from inside, but the runtime
	// installs one). They are caught, not ignored: an ignored signal stays
	// ignored in every program the agent execs, a caught one is reset to
	// its default there. A command that means to can still crash the
	// agent (SIGABRT), which the gateway sees as a dead sandbox.
	drop := make(chan os.Signal, 8)
	signal.Notify(drop, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM)
	go func() {
		for range drop {
		}
	}()
	defer s.killAll()

	r := bufio.NewReaderSize(in, 64<<10)
	mac, body, err := readFrame(r, macSize)
	if err != nil {
		return fmt.Errorf("read hello: %w", err)
	}
	var hello request
	if err := json.Unmarshal(body, &hello); err != nil || hello.Type != typeHello || len(hello.Key) != keySize {
		return fmt.Errorf("%w: first frame is not a hello", ErrProtocol)
	}
	key := hello.Key
	if !hmac.Equal(mac, frameMAC(key, 0, body)) {
		return fmt.Errorf("%w: hello fails its MAC", ErrProtocol)
	}
	if hello.Dial != "" {
		// The gateway listens on a socket it made for this agent alone
		// (it accepts one connection and removes it): the channel moves
		// there, off the container runtime's stdio relay. End of stdin
		// still ends the agent.
		nc, err := net.DialTimeout("unix", hello.Dial, dialTimeout)
		if err != nil {
			return fmt.Errorf("dial the gateway at %s: %w", hello.Dial, err)
		}
		s.out = nc
		if err := s.write(reply{Type: typeProof, Proof: frameMAC(key, 0, []byte(dialProofLabel))}); err != nil {
			return fmt.Errorf("write proof: %w", err)
		}
		stdin := r
		go func() {
			// Nothing but the end may come on stdin now: a byte means
			// someone else is writing into it, and the agent stops.
			var b [1]byte
			n, _ := stdin.Read(b[:])
			s.killAll()
			if n > 0 {
				fmt.Fprintln(os.Stderr, "exechost sandbox agent: protocol error: input on stdin after the channel moved to the socket")
				os.Exit(1)
			}
			os.Exit(0)
		}()
		r = bufio.NewReaderSize(nc, 64<<10)
	}
	var egress string
	if hello.EgressListen != "" {
		ln, err := startRelay(hello.EgressListen, hello.EgressDial)
		if err != nil {
			return err
		}
		defer ln.Close()
		egress = ln.Addr().String()
	}
	nnp, _ := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	dump, _ := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	if err := s.write(reply{Type: typeReady, PID: os.Getpid(), UID: os.Getuid(), NoDump: dump == 0, NoNewPrivs: nnp == 1, Egress: egress}); err != nil {
		return fmt.Errorf("write ready: %w", err)
	}
	for seq := uint64(1); ; seq++ {
		mac, body, err := readFrame(r, macSize)
		if errors.Is(err, io.EOF) {
			return nil // the gateway closed the channel
		}
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if !hmac.Equal(mac, frameMAC(key, seq, body)) {
			return fmt.Errorf("%w: frame %d fails its MAC (someone else is writing to the channel?)", ErrProtocol, seq)
		}
		var req request
		if err := json.Unmarshal(body, &req); err != nil {
			return fmt.Errorf("%w: frame %d: %v", ErrProtocol, seq, err)
		}
		switch req.Type {
		case typeExec:
			if err := s.write(reply{Type: typeAccepted, ID: req.ID}); err != nil {
				return fmt.Errorf("write: %w", err)
			}
			go s.exec(req)
		case typeKill:
			s.mu.Lock()
			cmd := s.running[req.ID]
			s.mu.Unlock()
			if cmd != nil {
				cmd.once.Do(func() { close(cmd.killed) })
			}
		default:
			return fmt.Errorf("%w: unknown request type %q", ErrProtocol, req.Type)
		}
	}
}

// warmThreads makes the runtime create spareThreads OS threads now and
// park them idle for later reuse (see spareThreads).
func warmThreads() {
	var wg sync.WaitGroup
	release := make(chan struct{})
	for range spareThreads {
		wg.Add(1)
		go func() {
			runtime.LockOSThread()
			wg.Done()
			<-release
			runtime.UnlockOSThread()
		}()
	}
	wg.Wait()
	close(release)
}

// write sends one reply frame.
func (s *server) write(rep reply) error {
	body := encode(rep)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return writeFrame(s.out, nil, body)
}

// reapLoop reaps every child that exits — as pid 1 of a container, every
// orphan the kernel hands to it — except commands' leaders: it tells a
// command its leader exited (leaving it a zombie) and the command reaps it
// after its last group kill (finish).
func (s *server) reapLoop(sigs <-chan os.Signal) {
	for {
		s.reapPass()
		select {
		case <-sigs:
		case <-s.kick:
		}
	}
}

// reapPass tells every command whose leader exited, then reaps the other
// zombie children.
func (s *server) reapPass() {
	var fresh []int // leaders whose exit this pass found
	s.mu.Lock()
	for pid, l := range s.leaders {
		// Each leader is asked by its own pid: a kept zombie never hides
		// another command's exit.
		if !l.seen {
			if got, err := waitidPid(unix.P_PID, pid); err == nil && got == pid {
				l.seen = true
				close(l.exited)
				fresh = append(fresh, pid)
			}
		}
	}
	s.mu.Unlock()
	// The first zombie child waitid reports (without reaping it): one that
	// is not a kept leader is reaped, and the next one looked at.
	var front int
	for {
		pid, err := waitidPid(unix.P_ALL, 0)
		if err != nil || pid <= 0 {
			return // no child, or none has exited
		}
		if !s.reapUnlessKept(pid) {
			front = pid
			break
		}
	}
	// A kept leader is first in line, and waitid would report it again
	// and again. One whose exit this pass found is left alone: its
	// command reaps it soon and kicks another pass (finish), so reading
	// /proc after every command's exit is spared. Otherwise the zombies
	// behind it are found in /proc. Without /proc they wait until the
	// kept leaders ahead of them are reaped.
	if slices.Contains(fresh, front) {
		return
	}
	self := os.Getpid()
	for _, p := range readProcs() {
		if p.ppid == self && p.state == 'Z' {
			s.reapUnlessKept(p.pid)
		}
	}
}

// reapUnlessKept reaps zombie child pid unless it is a kept leader, and
// reports whether it did. The check and the reap are one step under s.mu,
// which a fork and its registration hold too: the pid cannot meanwhile be
// reaped by finish and given to a new leader.
func (s *server) reapUnlessKept(pid int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leaders[pid] != nil {
		return false
	}
	var ws syscall.WaitStatus
	got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	return err == nil && got == pid
}

// waitidPid is waitid(idtype, id, WEXITED|WNOHANG|WNOWAIT): the pid of an
// exited child that stays a zombie, 0 if none has exited.
func waitidPid(idtype, id int) (int, error) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(idtype, id, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		pid, _ := sigchld(&info) // WNOHANG leaves it 0
		return int(pid), nil
	}
}

// sigchld reads si_pid and si_status of a child's siginfo, which x/sys
// leaves opaque: they start the kernel's union of fields, after si_signo,
// si_errno and si_code and aligned to a pointer, with si_uid between them.
func sigchld(info *unix.Siginfo) (pid, status int32) {
	word := unsafe.Sizeof(uintptr(0))
	p := unsafe.Add(unsafe.Pointer(info), (3*unsafe.Sizeof(int32(0))+word-1)&^(word-1))
	return *(*int32)(p), *(*int32)(unsafe.Add(p, 8))
}

// finish ends command id whose leader pid has exited (kept in s.leaders) and whose
// group has had its last kill: it is forgotten by killAll first, then
// reaped, and its wait status returned.
func (s *server) finish(id uint64, pid int) syscall.WaitStatus {
	s.mu.Lock()
	delete(s.running, id)
	s.mu.Unlock()
	if s.beforeReap != nil {
		s.beforeReap(pid)
	}
	var ws syscall.WaitStatus
	s.mu.Lock()
	for {
		// It has exited (its leader's exited is closed): this does not block.
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
			break
		}
	}
	delete(s.leaders, pid) // still this command's: its zombie held the pid until the Wait4 above
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return ws
}

// killAll kills every running command's group (the gateway went away).
func (s *server) killAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.running {
		_ = syscall.Kill(-c.pgid, syscall.SIGKILL)
	}
}

// exec runs one command and writes its result.
func (s *server) exec(req request) {
	res := s.run(req)
	res.Type, res.ID = typeResult, req.ID
	if err := s.write(res); err != nil {
		// The channel is broken; the main loop ends with it.
		return
	}
}

// startFailure is the reply for a command that never started, worded as a
// shell would (the fresh-sandbox backend reports the same).
func startFailure(argv0 string, err error) reply {
	code := 126
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, errNotFound) {
		code = 127
		return reply{ExitCode: code, Stderr: []byte(argv0 + ": not found\n")}
	}
	return reply{ExitCode: code, Stderr: []byte(fmt.Sprintf("%s: %v\n", argv0, err))}
}

var errNotFound = errors.New("not found")

// run forks req's command in its own process group, waits for it (killing
// the group on timeout or kill request), and returns its capped output.
func (s *server) run(req request) reply {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return reply{ExitCode: -1, Error: "empty argv"}
	}
	env := overlay(s.env, req.Env)
	path, err := lookPath(req.Argv[0], env)
	if err != nil {
		return startFailure(req.Argv[0], err)
	}
	if req.Cwd != "" {
		if fi, err := os.Stat(req.Cwd); err != nil || !fi.IsDir() {
			return reply{StartError: fmt.Sprintf("cwd %s: not a directory (hint: pass an existing directory)", req.Cwd)}
		}
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return reply{ExitCode: -1, Error: err.Error()}
	}
	defer devnull.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		return reply{ExitCode: -1, Error: err.Error()}
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return reply{ExitCode: -1, Error: err.Error()}
	}
	defer outR.Close()
	defer errR.Close()

	cmd := &command{killed: make(chan struct{})}
	l := &leader{exited: make(chan struct{})}
	attr := &syscall.ProcAttr{
		Dir:   req.Cwd,
		Env:   env,
		Files: []uintptr{devnull.Fd(), outW.Fd(), errW.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	// Fork and registration under s.mu: the reap loop, which may see the
	// child exit at once, looks it up under the same lock.
	s.mu.Lock()
	pid, err := syscall.ForkExec(path, req.Argv, attr)
	if err == nil {
		s.leaders[pid] = l
		cmd.pgid = pid
		s.running[req.ID] = cmd
	}
	s.mu.Unlock()
	outW.Close()
	errW.Close()
	if err != nil {
		return startFailure(req.Argv[0], err)
	}

	capture := runner.NewCapture(runner.MaxOutput, runner.TailSize)
	copied := make(chan struct{}, 2)
	for _, p := range []struct {
		r *os.File
		w io.Writer
	}{{outR, capture.Stdout()}, {errR, capture.Stderr()}} {
		go func() {
			_, _ = io.Copy(p.w, p.r)
			copied <- struct{}{}
		}()
	}

	var timeout <-chan time.Time
	if req.TimeoutMs > 0 {
		t := time.NewTimer(time.Duration(req.TimeoutMs) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	var timedOut, canceled bool
	select {
	case <-l.exited:
	case <-timeout:
		timedOut = true
	case <-cmd.killed:
		canceled = true
	}
	// The leader stays a zombie until finish, so every kill below reaches
	// this command's group, never a group that took its id.
	if timedOut || canceled {
		killTree(pid)
		<-l.exited
		// Anything forked while the kill was in flight dies now.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	// Background processes still holding the output get the grace, then
	// their group is killed and the pipes closed, as runner.Run does.
	if !drain(copied, s.grace) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		outR.Close()
		errR.Close()
		drain(copied, s.grace)
	}
	ws := s.finish(req.ID, pid)
	var o runner.Outcome
	switch {
	case timedOut:
		o.ExitCode, o.TimedOut = -1, true
		o.Error = fmt.Sprintf("timed out after %s: process group killed", time.Duration(req.TimeoutMs)*time.Millisecond)
	case canceled:
		o.ExitCode, o.Canceled = -1, true
		o.Error = "canceled: process group killed"
	case ws.Signaled():
		o.ExitCode = 128 + int(ws.Signal())
		o.Error = "killed by signal " + ws.Signal().String()
	default:
		o.ExitCode = ws.ExitStatus()
	}
	return replyOf(capture.Finish(o), o.Canceled)
}

// drain waits up to grace for both output copiers to finish.
func drain(copied <-chan struct{}, grace time.Duration) bool {
	t := time.NewTimer(grace)
	defer t.Stop()
	for range 2 {
		select {
		case <-copied:
		case <-t.C:
			return false
		}
	}
	return true
}

// overlay returns base with the names set in over replaced, then over.
func overlay(base, over []string) []string {
	if len(over) == 0 {
		return base
	}
	set := map[string]bool{}
	for _, kv := range over {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	env := make([]string, 0, len(base)+len(over))
	for _, kv := range base {
		if k, _, _ := strings.Cut(kv, "="); !set[k] {
			env = append(env, kv)
		}
	}
	return append(env, over...)
}

// lookPath resolves a bare program name in env's PATH, as a shell would;
// a name with a slash is used as given.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errNotFound
}

// maxKillRounds bounds the freeze rounds of killTree: each round stops the
// processes found so far, so a new round finds only what was forked while
// the previous one ran.
const maxKillRounds = 8

// killTree kills a timed-out command: its process group, and every
// descendant of its leader that left the group (setsid, set -m) while its
// parent still lived. They are found through /proc's parent links and
// stopped (SIGSTOP) round by round while the leader, stopped too, keeps
// the tree linked; then all are killed. A process that both left the
// group and was orphaned before the timeout (a double-forked daemon) is
// not found; the sandbox's idle removal ends it.
func killTree(leader int) {
	found := map[int]bool{}
	for range maxKillRounds {
		_ = syscall.Kill(-leader, syscall.SIGSTOP)
		n := 0
		for _, p := range descendants(leader) {
			if !found[p] {
				found[p] = true
				_ = syscall.Kill(p, syscall.SIGSTOP)
				n++
			}
		}
		if n == 0 {
			break
		}
	}
	_ = syscall.Kill(-leader, syscall.SIGKILL)
	for p := range found {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// descendants lists the processes below pid in /proc's parent links.
func descendants(pid int) []int {
	children := map[int][]int{}
	for _, p := range readProcs() {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// procInfo is what the agent reads of a process in /proc/<pid>/stat.
type procInfo struct {
	pid, ppid, pgrp int
	state           byte
}

// readProcs lists the processes /proc shows (none without /proc).
func readProcs() []procInfo {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	out := make([]procInfo, 0, len(stats))
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		sp := bytes.IndexByte(b, ' ')
		if i < 0 || sp < 0 {
			continue
		}
		var p procInfo
		if _, err := fmt.Sscanf(string(b[:sp]), "%d", &p.pid); err != nil {
			continue
		}
		if _, err := fmt.Sscanf(string(b[i+1:]), " %c %d %d", &p.state, &p.ppid, &p.pgrp); err != nil {
			continue
		}
		out = append(out, p)
	}
	return out
}
