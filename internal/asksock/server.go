package asksock

import (
	"github.com/exechost/exechost/internal/prompt"

	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/gofrs/flock"
	"golang.org/x/time/rate"
)

// Defaults of Server's tunables.
const (
	// DefaultRate and DefaultBurst bound the frames one peer process may
	// send: enough for many agents' prompts, too few for a flood.
	DefaultRate  = rate.Limit(20)
	DefaultBurst = 40
	// DefaultIdleTimeout closes a connection that has nothing pending and
	// sends nothing (a half-open or forgotten client).
	DefaultIdleTimeout = 30 * time.Second
	// DefaultMaxConns bounds concurrent connections. When every slot is
	// taken, an idle connection (no prompt or exec in flight) of the peer
	// holding the most connections is closed to admit the new one, so idle
	// peers can never keep a legitimate prompt out.
	DefaultMaxConns = 64
	// DefaultMaxConnsPerPeer bounds the connections of one peer process
	// (uid+pid from SO_PEERCRED): room for many concurrent prompts of one
	// gateway or node runner, a quarter of the table.
	DefaultMaxConnsPerPeer = 16
	// DefaultHelloTimeout closes a connection that has not had a request
	// or exec frame accepted this long after hello: a real client sends
	// its frame at once, a slow-loris never does.
	DefaultHelloTimeout = 5 * time.Second
	// DefaultPromptTimeout is how long a prompt stays queued when the
	// request carries no expiresAtMs.
	DefaultPromptTimeout = 120 * time.Second
	// MaxPromptTimeout caps a request's expiresAtMs so a client cannot
	// park entries in the queue forever.
	MaxPromptTimeout = time.Hour
	// maxPendingPerConn bounds the prompts one connection may have queued.
	maxPendingPerConn = 32
	// maxNoncesPerConn bounds the replay memory of one connection; a
	// connection that uses more must reconnect (fresh challenge).
	maxNoncesPerConn = 4096
	// writeTimeout bounds one frame write to a peer that does not read.
	writeTimeout = 5 * time.Second
)

// Server is the approver side of the approval socket. It authenticates
// each request (peer uid, challenge, hmac, ts, nonce, rate) and submits the
// valid ones to Broker; the decision goes back signed. Fields are read at
// Listen/Serve and must not change afterwards.
type Server struct {
	// Path is the socket path (<state>/exec-approvals.sock).
	Path string
	// Token is exec-approvals.json's socket.token (its UTF-8 bytes); it
	// keys both HMACs and never crosses the socket.
	Token []byte
	// Broker receives every authenticated prompt.
	Broker *prompt.Broker
	// Exec, when set, makes the approver an exec host: authenticated exec
	// frames run through it (docs/approver-exec-host.md). nil refuses them.
	Exec Executor

	// MaxFrame is the longest accepted line (default MaxFrame, 256 KiB).
	MaxFrame int
	// Rate and Burst limit frames per peer process (uid+pid).
	Rate  rate.Limit
	Burst int
	// IdleTimeout closes idle connections (default DefaultIdleTimeout).
	IdleTimeout time.Duration
	// MaxConns bounds concurrent connections (default DefaultMaxConns).
	MaxConns int
	// MaxConnsPerPeer bounds one peer process's concurrent connections
	// (default DefaultMaxConnsPerPeer).
	MaxConnsPerPeer int
	// HelloTimeout closes a connection with no accepted frame this long
	// after hello (default DefaultHelloTimeout).
	HelloTimeout time.Duration
	// Logf, if set, receives one line per refused frame or connection.
	Logf func(format string, args ...any)
	// Now is the approver's clock (default time.Now); tests move it.
	Now func() time.Time

	mu       sync.Mutex
	ln       net.Listener
	lock     *flock.Flock
	conns    map[net.Conn]*slot
	perPeer  map[string]int // open connections per peer key
	seq      uint64         // admission order, for choosing the oldest idle victim
	limiters map[string]*peerLimiter
	closed   bool
	wg       sync.WaitGroup
	uid      string

	// afterFunc arms the hello timer (default time.AfterFunc); tests
	// replace it to fire the timer themselves instead of racing a clock.
	afterFunc func(d time.Duration, f func()) (stop func() bool)
}

// slot is one admitted connection in the server's table.
type slot struct {
	peer string // uid/pid
	seq  uint64
	cn   *conn // set once handle has built it; nil until then (idle)
}

// busy reports whether a connection has a prompt or exec in flight; such
// a connection is never evicted for a newcomer.
func (sl *slot) busy() bool {
	if sl.cn == nil {
		return false
	}
	sl.cn.mu.Lock()
	defer sl.cn.mu.Unlock()
	return len(sl.cn.pending) > 0
}

type peerLimiter struct {
	lim      *rate.Limiter
	lastUsed time.Time
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Server) logf(format string, args ...any) {
	if s.Logf != nil {
		s.Logf(format, args...)
	}
}

func (s *Server) helloTimeout() time.Duration {
	if s.HelloTimeout > 0 {
		return s.HelloTimeout
	}
	return DefaultHelloTimeout
}

func (s *Server) armHello(f func()) (stop func() bool) {
	if s.afterFunc != nil {
		return s.afterFunc(s.helloTimeout(), f)
	}
	return time.AfterFunc(s.helloTimeout(), f).Stop
}

func (s *Server) maxFrame() int {
	if s.MaxFrame > 0 {
		return s.MaxFrame
	}
	return MaxFrame
}

func (s *Server) idle() time.Duration {
	if s.IdleTimeout > 0 {
		return s.IdleTimeout
	}
	return DefaultIdleTimeout
}

// Addr returns the socket path once listening, else "".
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.Path
}

// Serve listens (unless Listen was called) and accepts connections until
// ctx is done or Close is called; it then closes every connection, which
// expires their pending prompts, and removes the socket.
func (s *Server) Serve(ctx context.Context) error {
	if s.Broker == nil {
		return errors.New("serve approval socket: nil prompt.Broker")
	}
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	if ln == nil {
		if err := s.Listen(); err != nil {
			return err
		}
		s.mu.Lock()
		ln = s.ln
		s.mu.Unlock()
	}
	s.uid = strconv.Itoa(os.Getuid())

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()

	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			s.Close()
			s.wg.Wait()
			if closed || ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept on %s: %w", s.Path, err)
		}
		// The peer's credentials come first: admission is per process.
		peer, perr := peerOf(c)
		sl, victim, why := s.admit(c, peer)
		if victim != nil {
			s.logf("approver: closing idle connection of %s to admit %s", victim.peer, peer)
			victim.c.Close()
		}
		if sl == nil {
			if why != "" {
				s.logf("approver: refusing connection of %s: %s", peer, why)
				writeFrameTimeout(c, ErrorFrame{Type: TypeError, Code: CodeRateLimited, Message: why})
			}
			c.Close()
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.untrack(c)
			s.handle(ctx, c, sl, peer, perr)
		}()
	}
}

// evicted names a connection admit closed for a newcomer.
type evicted struct {
	c    net.Conn
	peer string
}

// admit decides whether a new connection gets a slot: at most
// MaxConnsPerPeer per peer process; when all MaxConns slots are taken, an
// idle connection of the peer with the most connections (oldest first) is
// evicted, and only when every connection is busy is the newcomer refused.
// It returns the slot (nil when refused, with why), and the connection to
// close, if any.
func (s *Server) admit(c net.Conn, peer peerInfo) (*slot, *evicted, string) {
	key := peer.key()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, ""
	}
	if s.conns == nil {
		s.conns = make(map[net.Conn]*slot)
		s.perPeer = make(map[string]int)
	}
	maxPeer := s.MaxConnsPerPeer
	if maxPeer <= 0 {
		maxPeer = DefaultMaxConnsPerPeer
	}
	if s.perPeer[key] >= maxPeer {
		return nil, nil, fmt.Sprintf("too many connections from this process (limit %d)", maxPeer)
	}
	maxConns := s.MaxConns
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	var victim *evicted
	if len(s.conns) >= maxConns {
		var vc net.Conn
		var vs *slot
		for oc, osl := range s.conns {
			if osl.busy() {
				continue
			}
			if vs == nil || s.perPeer[osl.peer] > s.perPeer[vs.peer] ||
				(s.perPeer[osl.peer] == s.perPeer[vs.peer] && osl.seq < vs.seq) {
				vc, vs = oc, osl
			}
		}
		if vs == nil {
			return nil, nil, fmt.Sprintf("too many connections (%d), all with prompts in flight", maxConns)
		}
		s.dropLocked(vc)
		victim = &evicted{c: vc, peer: vs.peer}
	}
	s.seq++
	sl := &slot{peer: key, seq: s.seq}
	s.conns[c] = sl
	s.perPeer[key]++
	return sl, victim, ""
}

// dropLocked removes c from the table (once; later calls are no-ops).
func (s *Server) dropLocked(c net.Conn) {
	sl, ok := s.conns[c]
	if !ok {
		return
	}
	delete(s.conns, c)
	if s.perPeer[sl.peer]--; s.perPeer[sl.peer] <= 0 {
		delete(s.perPeer, sl.peer)
	}
}

func (s *Server) untrack(c net.Conn) {
	c.Close()
	s.mu.Lock()
	s.dropLocked(c)
	s.mu.Unlock()
}

// Conns returns how many connections are open (for tests and status).
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Close stops the server: the listener (removing the socket file), every
// connection, and the lock. It is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ln, lock := s.ln, s.lock
	conns := make([]net.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	var err error
	if ln != nil {
		err = ln.Close()
	}
	for _, c := range conns {
		c.Close()
	}
	if lock != nil {
		lock.Unlock()
	}
	return err
}

// limiter returns the rate limiter of one peer process, pruning limiters
// unused for ten minutes when the table grows.
func (s *Server) limiter(p peerInfo) *rate.Limiter {
	key := p.key()
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limiters == nil {
		s.limiters = make(map[string]*peerLimiter)
	}
	pl, ok := s.limiters[key]
	if !ok {
		if len(s.limiters) >= 1024 {
			for k, v := range s.limiters {
				if now.Sub(v.lastUsed) > 10*time.Minute {
					delete(s.limiters, k)
				}
			}
		}
		r, b := s.Rate, s.Burst
		if r == 0 {
			r = DefaultRate
		}
		if b <= 0 {
			b = DefaultBurst
		}
		pl = &peerLimiter{lim: rate.NewLimiter(r, b)}
		s.limiters[key] = pl
	}
	pl.lastUsed = now
	return pl.lim
}
