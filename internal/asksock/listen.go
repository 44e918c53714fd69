package asksock

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gofrs/flock"
	"github.com/tailscale/peercred"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/state"
)

// peerInfo identifies the process on the other end of a connection.
type peerInfo struct {
	uid string
	pid int
}

func (p peerInfo) String() string { return fmt.Sprintf("uid %s pid %d", p.uid, p.pid) }

// key identifies the peer process for per-process limits.
func (p peerInfo) key() string { return p.uid + "/" + strconv.Itoa(p.pid) }

// peerOf returns the peer's credentials (SO_PEERCRED on Linux,
// LOCAL_PEERCRED/getpeereid on macOS). Where they cannot be read the
// connection is refused: identity unknown means not trusted.
func peerOf(c net.Conn) (peerInfo, error) {
	cr, err := peercred.Get(c)
	if err != nil {
		return peerInfo{}, fmt.Errorf("read peer credentials: %w", err)
	}
	uid, ok := cr.UserID()
	if !ok {
		return peerInfo{}, errors.New("read peer credentials: no uid")
	}
	pid, _ := cr.PID()
	return peerInfo{uid: uid, pid: pid}, nil
}

// Listen creates the socket at s.Path. The directory must exist, be ours
// and be closed to group and others (0700); the socket is made 0600. A stale
// socket file (nothing answers a dial) is replaced; a live one is left alone
// and ErrAlreadyRunning names the running approver's pid. A lock file next
// to the socket (Path + ".lock", held while serving) closes the race between
// two approvers starting at once.
func (s *Server) Listen() error {
	if err := platformSupported(); err != nil {
		return err
	}
	if len(s.Token) == 0 {
		return hint.Wrap(fmt.Errorf("listen %s: empty token", s.Path), "exec-approvals.json needs socket.token; `exechost approvals get` creates one")
	}
	dir := filepath.Dir(s.Path)
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.Path, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("listen %s: %s is not a directory", s.Path, dir)
	}
	if err := state.CheckOwner(fi); err != nil {
		return fmt.Errorf("listen %s: directory %s %w", s.Path, dir, err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return hint.Wrap(fmt.Errorf("listen %s: directory %s is mode %#o, open to other users", s.Path, dir, perm), fmt.Sprintf("chmod 700 %s", dir))
	}

	lock := flock.New(s.Path + ".lock")
	locked, err := lock.TryLock()
	if err != nil {
		return fmt.Errorf("listen %s: lock: %w", s.Path, err)
	}
	if !locked {
		return alreadyRunning(s.Path)
	}
	ok := false
	defer func() {
		if !ok {
			lock.Unlock()
		}
	}()

	if fi, err := os.Lstat(s.Path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return hint.Wrap(fmt.Errorf("listen %s: a file that is not a socket is in the way", s.Path), "move it aside")
		}
		if _, live := probe(s.Path); live {
			return alreadyRunning(s.Path)
		}
		if err := os.Remove(s.Path); err != nil {
			return fmt.Errorf("listen %s: remove stale socket: %w", s.Path, err)
		}
	}
	ln, err := net.Listen("unix", s.Path)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.Path, err)
	}
	if err := os.Chmod(s.Path, 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("listen %s: chmod socket: %w", s.Path, err)
	}
	s.mu.Lock()
	s.ln = ln
	s.lock = lock
	s.mu.Unlock()
	ok = true
	return nil
}

// alreadyRunning builds the ErrAlreadyRunning error, naming the pid of the
// process that owns the live socket when peer credentials tell it.
func alreadyRunning(path string) error {
	pid, live := probe(path)
	who := "pid unknown"
	if live && pid > 0 {
		who = fmt.Sprintf("pid %d", pid)
	}
	return hint.Wrap(fmt.Errorf("%w (%s) on %s", ErrAlreadyRunning, who, path), "stop it first, or use another --state-dir")
}

// probe dials path and reports whether something listens there, and its
// pid when peer credentials give it.
func probe(path string) (pid int, live bool) {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return 0, false
	}
	defer c.Close()
	if p, err := peerOf(c); err == nil {
		pid = p.pid
	}
	// Read the hello before closing: closing with it unread resets the
	// connection, which the running approver prints as an error.
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = bufio.NewReader(c).ReadString('\n')
	return pid, true
}
