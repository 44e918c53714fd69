package asksock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/google/uuid"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/textsafe"
)

// DefaultClientTimeout is how long Client.Prompt waits for a human when
// Client.Timeout is zero.
const DefaultClientTimeout = 120 * time.Second

// Client is the execution host's side of the approval socket. It dials on
// demand (one connection per prompt), so an approver started after the
// execution host is found, and a crashed one costs nothing until a prompt
// needs it. It satisfies host.Prompter.
type Client struct {
	// SocketPath is the approver's socket (<state>/exec-approvals.sock).
	SocketPath string
	// Token is exec-approvals.json's socket.token (its UTF-8 bytes).
	Token []byte
	// Timeout is how long a prompt waits for a decision (default
	// DefaultClientTimeout); then askFallback applies.
	Timeout time.Duration

	// now tells whether an "expired" refusal came at the prompt's own
	// deadline (time.Now when nil; a test sets it).
	now func() time.Time
}

// expiresAtUnit is the unit of a request's expiresAtMs: the approver's
// view of the prompt's deadline may fall that much before the client's.
const expiresAtUnit = time.Millisecond

func (c *Client) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// errPromptTimeout is the cause of the client's own prompt deadline, to
// tell it apart from the caller's context ending.
var errPromptTimeout = errors.New("prompt timeout")

// Prompt asks the approver about req and returns its verified decision and
// who gave it. Any failure — no approver, timeout, a refused request, a
// closed connection, a reply whose hmac does not verify — is an error
// wrapping prompt.ErrUnreachable, prompt.ErrTimeout, prompt.ErrRefused or prompt.ErrBadReply, whose
// message says which; it is never an approval. An "expired" refusal read
// at the prompt's own deadline (to expiresAtMs's millisecond) is the
// prompt's timeout, prompt.ErrTimeout.
func (c *Client) Prompt(ctx context.Context, req prompt.Request) (policy.Approval, string, error) {
	if len(c.Token) == 0 {
		return "", "", hint.Wrap(fmt.Errorf("%w: no socket token", prompt.ErrUnreachable), "exec-approvals.json needs socket.token")
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultClientTimeout
	}
	if req.ExpiresAtMs > 0 {
		// The caller's expiry is when the approver drops the prompt; stop
		// waiting then too, so the outcome is our timeout, not a race.
		if left := time.Until(time.UnixMilli(req.ExpiresAtMs)); left < timeout {
			timeout = max(left, 0)
		}
	}
	tctx, cancel := context.WithTimeoutCause(ctx, timeout, errPromptTimeout)
	defer cancel()
	deadline, _ := tctx.Deadline()
	if req.ExpiresAtMs == 0 {
		req.ExpiresAtMs = deadline.UnixMilli()
	}
	timedOut := func(err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: prompt canceled: %w", prompt.ErrTimeout, context.Cause(ctx))
		}
		if errors.Is(context.Cause(tctx), errPromptTimeout) {
			return fmt.Errorf("%w: no decision within %s", prompt.ErrTimeout, timeout)
		}
		return err
	}

	var d net.Dialer
	conn, err := d.DialContext(tctx, "unix", c.SocketPath)
	if err != nil {
		if tctx.Err() != nil {
			return "", "", timedOut(err)
		}
		return "", "", hint.Wrap(fmt.Errorf("%w: dial %s: %v", prompt.ErrUnreachable, c.SocketPath, unwrapOp(err)), "start `exechost approver`")
	}
	defer conn.Close()
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(tctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	r := bufio.NewReaderSize(conn, 4096)

	readFrame := func() ([]byte, error) {
		line, err := readLine(r, MaxFrame)
		if err == nil {
			return line, nil
		}
		if tctx.Err() != nil {
			return nil, timedOut(err)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, fmt.Errorf("%w: no decision within %s", prompt.ErrTimeout, timeout)
		}
		return nil, fmt.Errorf("%w: approver closed the connection before deciding (%v)", prompt.ErrBadReply, err)
	}

	line, err := readFrame()
	if err != nil {
		return "", "", err
	}
	challenge, err := parseHello(line)
	if err != nil {
		return "", "", err
	}

	frame, id, err := signedFrame(TypeRequest, c.Token, challenge, req)
	if err != nil {
		return "", "", err
	}
	if _, err := conn.Write(frame); err != nil {
		if tctx.Err() != nil {
			return "", "", timedOut(err)
		}
		return "", "", fmt.Errorf("%w: send request: %v", prompt.ErrUnreachable, unwrapOp(err))
	}

	for {
		line, err := readFrame()
		if err != nil {
			return "", "", err
		}
		if ef, ok := parseError(line); ok {
			if ef.ID != "" && ef.ID != id {
				continue // not about our request
			}
			if ef.Code == CodeExpired && !c.clock().Before(deadline.Add(-expiresAtUnit)) {
				// The approver found the prompt past its expiresAtMs,
				// which is our own deadline to the field's millisecond: a
				// request that took that long to arrive (a loaded
				// machine) timed out, as one we stopped waiting for does.
				return "", "", fmt.Errorf("%w: no decision within %s (the approver: %s)", prompt.ErrTimeout, timeout, textsafe.Bounded(ef.Message, 200))
			}
			return "", "", fmt.Errorf("%w: %s: %s", prompt.ErrRefused, ef.Code, textsafe.Bounded(ef.Message, 200))
		}
		var df DecisionFrame
		if err := json.Unmarshal(line, &df); err != nil || df.Type != TypeDecision {
			return "", "", fmt.Errorf("%w: unexpected frame", prompt.ErrBadReply)
		}
		if df.ID != id {
			return "", "", fmt.Errorf("%w: decision for another request id", prompt.ErrBadReply)
		}
		if !macEqual(df.HMAC, DecisionMAC(c.Token, challenge, id, df.Decision)) {
			return "", "", hint.Wrap(fmt.Errorf("%w: decision hmac does not verify", prompt.ErrBadReply), "approver and host must share exec-approvals.json's token")
		}
		a := policy.Approval(df.Decision)
		if !a.Valid() {
			return "", "", fmt.Errorf("%w: unknown decision %q", prompt.ErrBadReply, textsafe.Bounded(df.Decision, 32))
		}
		if !prompt.Offered(req, a) {
			return "", "", fmt.Errorf("%w: decision %s was not offered", prompt.ErrBadReply, a)
		}
		return a, sanitizeBy(df.By), nil
	}
}

// parseError recognises an error frame.
func parseError(line []byte) (ErrorFrame, bool) {
	var ef ErrorFrame
	if json.Unmarshal(line, &ef) != nil || ef.Type != TypeError {
		return ErrorFrame{}, false
	}
	ef.Code = textsafe.Bounded(ef.Code, 32)
	return ef, true
}

// sanitizeBy keeps the unauthenticated, informational "by" field printable
// and short; it defaults to "approver".
func sanitizeBy(by string) string {
	by = textsafe.Strip(by, 64)
	if by == "" {
		return "approver"
	}
	return by
}

// unwrapOp drops net.OpError's address noise for a shorter message.
func unwrapOp(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err
	}
	return err
}

// parseHello checks the approver's first frame and returns its challenge.
// Both clients (Client.Prompt and ExecClient.Exec) use it, so a bad hello
// is classified once: nothing has been sent yet, so an error frame is
// prompt.ErrRefused and anything else that is not a hello of this protocol is
// prompt.ErrUnreachable (no working approver listens there) — never "may have
// run".
func parseHello(line []byte) (challenge string, err error) {
	var hello Hello
	if err := json.Unmarshal(line, &hello); err != nil || hello.Type != TypeHello {
		if ef, ok := parseError(line); ok {
			return "", fmt.Errorf("%w: %s: %s", prompt.ErrRefused, textsafe.Bounded(ef.Code, 32), textsafe.Bounded(ef.Message, 200))
		}
		return "", fmt.Errorf("%w: expected hello frame", prompt.ErrUnreachable)
	}
	if hello.V != ProtocolVersion || !isHex16(hello.Challenge) {
		return "", fmt.Errorf("%w: hello with protocol v%d or malformed challenge", prompt.ErrUnreachable, hello.V)
	}
	return hello.Challenge, nil
}

// signedFrame encodes req as one frame of type typ (TypeRequest or
// TypeExec) for the connection whose hello carried challenge: a fresh id,
// nonce and timestamp, and RequestMAC over the raw request bytes. It
// returns the line to write (newline included) and the frame's id, which
// the answer must carry.
func signedFrame(typ string, token []byte, challenge string, req any) (line []byte, id string, err error) {
	raw, err := json.Marshal(req)
	if err != nil {
		return nil, "", fmt.Errorf("encode %s request: %w", typ, err)
	}
	id = uuid.NewString()
	nonce := randomHex(16)
	ts := time.Now().UnixMilli()
	line, err = json.Marshal(RequestFrame{
		Type: typ, ID: id, TS: ts, Nonce: nonce, Request: raw,
		HMAC: RequestMAC(token, challenge, nonce, ts, raw),
	})
	if err != nil {
		return nil, "", fmt.Errorf("encode %s frame: %w", typ, err)
	}
	return append(line, '\n'), id, nil
}
