package asksock

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
)

// errTooLarge is returned by readLine for a line over the frame limit.
var errTooLarge = errors.New("frame too large")

// expiryGrace is how long past ExpiresAt the server keeps a prompt's
// connection slot before sending "expired" itself.
const expiryGrace = 2 * time.Second

// readLine reads one newline-terminated line of at most max bytes (the
// newline and a trailing CR excluded). A longer line returns errTooLarge
// without buffering more than max bytes of it.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		n := len(chunk)
		if err == nil {
			n-- // the newline does not count
		}
		if len(line)+n > max {
			return nil, errTooLarge
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			line = line[:len(line)-1]
			return bytes.TrimSuffix(line, []byte{'\r'}), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, err // EOF mid-line: the partial frame is dropped
		}
	}
}

// conn is one authenticated-peer connection on the server.
type conn struct {
	s         *Server
	c         net.Conn
	peer      peerInfo
	challenge string

	wmu sync.Mutex // serialises frame writes

	mu        sync.Mutex // guards pending, the read deadline and stopHello
	pending   map[string]bool
	nonces    map[string]struct{}
	stopHello func() bool // disarms the hello timer; nil once disarmed
}

// handle runs one connection: peer check, hello, then frames until the peer
// leaves, idles out, sends an oversized frame or the server closes.
func (s *Server) handle(ctx context.Context, c net.Conn, sl *slot, peer peerInfo, err error) {
	if err != nil {
		s.logf("approver: refusing connection: %v", err)
		writeFrameTimeout(c, ErrorFrame{Type: TypeError, Code: CodeInvalidAuth, Message: "peer credentials unavailable"})
		return
	}
	if peer.uid != s.uid {
		s.logf("approver: refusing %s: not the approver's uid %s", peer, s.uid)
		writeFrameTimeout(c, ErrorFrame{Type: TypeError, Code: CodeInvalidAuth, Message: fmt.Sprintf("peer uid %s is not the approver's uid", peer.uid)})
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cn := &conn{s: s, c: c, peer: peer, challenge: randomHex(16), pending: map[string]bool{}, nonces: map[string]struct{}{}}
	s.mu.Lock()
	sl.cn = cn
	s.mu.Unlock()
	// A connection must get a request or exec frame accepted within
	// HelloTimeout of hello; armDeadlineLocked disarms the timer then.
	cn.mu.Lock()
	cn.stopHello = s.armHello(func() {
		s.logf("approver: %s: no request within %s of hello; closing", peer, s.helloTimeout())
		c.Close()
	})
	cn.mu.Unlock()
	defer func() {
		cn.mu.Lock()
		if cn.stopHello != nil {
			cn.stopHello()
		}
		cn.mu.Unlock()
	}()
	if err := cn.write(Hello{Type: TypeHello, V: ProtocolVersion, Challenge: cn.challenge}); err != nil {
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // expire this connection's prompts before waiting for them
	r := bufio.NewReaderSize(c, 4096)
	lim := s.limiter(peer)
	limited := 0
	for {
		cn.mu.Lock()
		cn.armDeadlineLocked()
		cn.mu.Unlock()
		line, err := readLine(r, s.maxFrame())
		if errors.Is(err, errTooLarge) {
			s.logf("approver: %s: frame over %d bytes; closing", peer, s.maxFrame())
			cn.write(ErrorFrame{Type: TypeError, Code: CodeTooLarge, Message: fmt.Sprintf("frame larger than %d bytes", s.maxFrame())})
			return
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.logf("approver: %s: %v; closing", peer, err)
			}
			return
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if !lim.Allow() {
			limited++
			if limited == 1 { // log a flood once, not per frame
				s.logf("approver: %s: rate limit exceeded; refusing frames", peer)
			}
			cn.write(ErrorFrame{Type: TypeError, Code: CodeRateLimited, Message: "too many frames; slow down"})
			if limited > 1000 {
				return
			}
			continue
		}
		limited = 0
		if frameType(line) == TypeExec {
			if !cn.handleExec(ctx, line, &wg) {
				return
			}
			continue
		}
		p, code, msg := cn.verify(line)
		if code != "" {
			cn.refuse(p.ID, code, msg)
			if code == CodeRateLimited && len(cn.nonces) >= maxNoncesPerConn {
				return
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cn.await(ctx, p)
		}()
	}
}

// armDeadlineLocked sets the idle read deadline: none while prompts are
// pending (the peer is waiting for us), IdleTimeout otherwise.
func (cn *conn) armDeadlineLocked() {
	if len(cn.pending) > 0 && cn.stopHello != nil {
		cn.stopHello() // the peer sent its request: the hello timer is done
		cn.stopHello = nil
	}
	if len(cn.pending) > 0 {
		cn.c.SetReadDeadline(time.Time{})
	} else {
		cn.c.SetReadDeadline(time.Now().Add(cn.s.idle()))
	}
}

// verify authenticates and parses one request frame. It returns the prompt
// to queue, or an error code and message. Authentication comes before
// anything that changes state, so a forged frame cannot burn nonces or ids.
func (cn *conn) verify(line []byte) (prompt.Pending, string, string) {
	f, replyID, now, code, msg := cn.authenticate(line, TypeRequest)
	if code != "" {
		return prompt.Pending{ID: replyID}, code, msg
	}
	p := prompt.Pending{ID: f.ID}
	var req prompt.Request
	if err := json.Unmarshal(f.Request, &req); err != nil {
		return p, CodeBadRequest, "malformed request object"
	}
	if req.Command == "" && len(req.Argv) == 0 {
		return p, CodeBadRequest, "request has neither command nor argv"
	}

	cn.mu.Lock()
	defer cn.mu.Unlock()
	if code, msg := cn.admitLocked(f); code != "" {
		return p, code, msg
	}

	p.Request = req
	p.Peer = cn.peer.String()
	p.ReceivedAt = now
	p.ExpiresAt = now.Add(DefaultPromptTimeout)
	if req.ExpiresAtMs > 0 {
		exp := time.UnixMilli(req.ExpiresAtMs)
		if !exp.After(now) {
			return p, CodeExpired, "the prompt's expiresAtMs has passed"
		}
		p.ExpiresAt = exp
		if limit := now.Add(MaxPromptTimeout); exp.After(limit) {
			p.ExpiresAt = limit
		}
	}
	cn.pending[f.ID] = true
	cn.armDeadlineLocked()
	return p, "", ""
}

// authenticate checks what request and exec frames share, in the order
// the package documentation gives: shape (bad-request), hmac
// (invalid-auth), ts (expired). It changes no state. replyID is the id an
// error frame may echo (empty when the id itself is malformed).
func (cn *conn) authenticate(line []byte, typ string) (f RequestFrame, replyID string, now time.Time, code, msg string) {
	if err := json.Unmarshal(line, &f); err != nil {
		return f, "", now, CodeBadRequest, "malformed frame: not a JSON object"
	}
	if f.Type != typ {
		return f, safeID(f.ID), now, CodeBadRequest, fmt.Sprintf("unexpected frame type %q", truncate(f.Type, 32))
	}
	if !validID(f.ID) {
		return f, "", now, CodeBadRequest, "missing or malformed id"
	}
	if !isHex16(f.Nonce) {
		return f, f.ID, now, CodeBadRequest, "nonce must be 16 bytes hex"
	}
	if len(f.Request) == 0 || f.Request[0] != '{' {
		return f, f.ID, now, CodeBadRequest, "request must be a JSON object"
	}
	if f.HMAC == "" {
		return f, f.ID, now, CodeInvalidAuth, "missing hmac"
	}
	want := RequestMAC(cn.s.Token, cn.challenge, f.Nonce, f.TS, f.Request)
	if !macEqual(f.HMAC, want) {
		return f, f.ID, now, CodeInvalidAuth, "hmac mismatch (hint: check the token in exec-approvals.json)"
	}
	now = cn.s.now()
	if skew := now.UnixMilli() - f.TS; skew > MaxSkewMillis || skew < -MaxSkewMillis {
		return f, f.ID, now, CodeExpired, fmt.Sprintf("ts is %d ms from the approver's clock (limit %d)", skew, MaxSkewMillis)
	}
	return f, f.ID, now, "", ""
}

// admitLocked records an authenticated frame's nonce (refusing a replay)
// and checks that its id may become pending on this connection. The caller
// holds cn.mu and marks the id pending once it accepts the frame.
func (cn *conn) admitLocked(f RequestFrame) (code, msg string) {
	if _, seen := cn.nonces[f.Nonce]; seen {
		return CodeReplay, "nonce already used on this connection"
	}
	if len(cn.nonces) >= maxNoncesPerConn {
		return CodeRateLimited, "too many requests on one connection (hint: reconnect)"
	}
	cn.nonces[f.Nonce] = struct{}{}
	if cn.pending[f.ID] {
		return CodeBadRequest, "id already pending on this connection"
	}
	if len(cn.pending) >= maxPendingPerConn {
		return CodeRateLimited, "too many pending prompts on this connection"
	}
	return "", ""
}

// await queues one prompt and writes its decision (or an expiry error).
func (cn *conn) await(ctx context.Context, p prompt.Pending) {
	defer func() {
		cn.mu.Lock()
		delete(cn.pending, p.ID)
		cn.armDeadlineLocked()
		cn.mu.Unlock()
	}()
	// The client's own deadline is ExpiresAt; the grace lets it time out
	// first (and report prompt.ErrTimeout) rather than race our expiry frame.
	// Resolve refuses answers after ExpiresAt regardless.
	wait := p.ExpiresAt.Sub(cn.s.now()) + expiryGrace
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	a, by, err := cn.s.Broker.Submit(ctx, p)
	if err != nil {
		if errors.Is(err, prompt.ErrDuplicateID) {
			cn.refuse(p.ID, CodeBadRequest, "id already in use")
			return
		}
		cn.refuse(p.ID, CodeExpired, "no decision before the prompt expired")
		return
	}
	if !a.Valid() || !prompt.Offered(p.Request, a) {
		a = policy.Reject // never sign something the broker should not have produced
	}
	cn.write(DecisionFrame{
		Type:     TypeDecision,
		ID:       p.ID,
		Decision: string(a),
		HMAC:     DecisionMAC(cn.s.Token, cn.challenge, p.ID, string(a)),
		By:       by,
	})
}

func (cn *conn) refuse(id, code, msg string) {
	cn.s.logf("approver: %s: refused %s: %s", cn.peer, code, msg)
	cn.write(ErrorFrame{Type: TypeError, ID: id, Code: code, Message: msg})
}

// write sends one frame; writes are serialised and bounded in time.
func (cn *conn) write(v any) error {
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	return writeFrameTimeout(cn.c, v)
}

func writeFrameTimeout(c net.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err = c.Write(append(b, '\n'))
	return err
}

// validID accepts ids of up to 128 characters from [A-Za-z0-9._:-] (uuids
// and similar); anything else is a bad request, so ids are safe to print.
func validID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == ':', r == '-':
		default:
			return false
		}
	}
	return true
}

func safeID(id string) string {
	if validID(id) {
		return id
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
