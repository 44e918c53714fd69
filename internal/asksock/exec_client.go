package asksock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/textsafe"
)

// execClientMargin is added to the approver's own bound on one exec for
// the client's default deadline, so the approver's answer (or its timeout)
// arrives before the client gives up.
const execClientMargin = 10 * time.Second

// helloTimeout bounds the wait for the approver's hello.
const helloTimeout = 10 * time.Second

// ExecClient forwards system.run to an approver started with --exec-host,
// over the approval socket. It dials once per command. Its errors say
// whether the command may have run: see ExecNotRun.
type ExecClient struct {
	// SocketPath is the approver's socket (<state>/exec-approvals.sock).
	SocketPath string
	// Token is exec-approvals.json's socket.token (its UTF-8 bytes).
	Token []byte
}

// ExecNotRun reports whether err from ExecClient.Exec guarantees that the
// approver did not run the command: no approver answered, or it refused
// the frame before running anything (prompt.ErrUnreachable, prompt.ErrRefused). Only then
// may a caller run the command elsewhere (execFallback local) without
// risking running it twice. A timeout or a connection lost after the frame
// was sent (prompt.ErrTimeout, prompt.ErrBadReply) means it may have run.
func ExecNotRun(err error) bool {
	return errors.Is(err, prompt.ErrUnreachable) || errors.Is(err, prompt.ErrRefused)
}

// Exec sends req to the approver and returns the verified result of the
// command it ran. A command that ran returns a nil error whatever its exit
// code. The approver's signed refusal (a denial, a refused env name) is the
// *bridge.Error it sent (code, message, structured denial), to be forwarded
// unchanged. Every other
// failure wraps prompt.ErrUnreachable, prompt.ErrRefused, prompt.ErrTimeout or prompt.ErrBadReply; a
// reply whose hmac does not verify is never a result.
//
// Without a deadline on ctx, Exec waits for the request's timeoutMs (or
// ExecDefaultTimeout) plus the approver's prompt allowance.
func (c *ExecClient) Exec(ctx context.Context, req bridge.SystemRunParams) (bridge.SystemRunResult, error) {
	if len(c.Token) == 0 {
		return bridge.SystemRunResult{}, hint.Wrap(fmt.Errorf("%w: no socket token", prompt.ErrUnreachable), "exec-approvals.json needs socket.token")
	}
	if _, ok := ctx.Deadline(); !ok {
		limit := ExecDefaultTimeout
		if req.TimeoutMs > 0 {
			limit = time.Duration(req.TimeoutMs) * time.Millisecond
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit+execGrace+execClientMargin)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()

	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.SocketPath)
	if err != nil {
		return bridge.SystemRunResult{}, hint.Wrap(fmt.Errorf("%w: dial %s: %v", prompt.ErrUnreachable, c.SocketPath, unwrapOp(err)), "start `exechost approver --exec-host`")
	}
	defer conn.Close()
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	r := bufio.NewReaderSize(conn, 64<<10)

	// A live approver says hello at once; one that does not is as good as
	// absent, and nothing has been sent yet.
	helloBy := time.Now().Add(helloTimeout)
	if deadline.Before(helloBy) {
		helloBy = deadline
	}
	conn.SetReadDeadline(helloBy)
	line, err := readLine(r, MaxFrame)
	if err != nil {
		return bridge.SystemRunResult{}, fmt.Errorf("%w: no hello from the approver: %v", prompt.ErrUnreachable, unwrapOp(err))
	}
	conn.SetReadDeadline(deadline)
	challenge, err := parseHello(line)
	if err != nil {
		return bridge.SystemRunResult{}, err
	}

	frame, id, err := signedFrame(TypeExec, c.Token, challenge, req)
	if err != nil {
		return bridge.SystemRunResult{}, err
	}
	if n, err := conn.Write(frame); err != nil {
		if n < len(frame) {
			// The approver only acts on complete lines: this one never
			// arrived whole, so nothing ran.
			return bridge.SystemRunResult{}, fmt.Errorf("%w: send exec frame: %v", prompt.ErrUnreachable, unwrapOp(err))
		}
		return bridge.SystemRunResult{}, fmt.Errorf("%w: send exec frame: %v (the command may have run)", prompt.ErrBadReply, unwrapOp(err))
	}

	for {
		line, err := readLine(r, MaxExecResFrame)
		if err != nil {
			if ctx.Err() != nil {
				return bridge.SystemRunResult{}, fmt.Errorf("%w: no exec result before the deadline: %w (the command may have run; it is not retried)", prompt.ErrTimeout, context.Cause(ctx))
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return bridge.SystemRunResult{}, fmt.Errorf("%w: no exec result before the deadline (the command may have run; it is not retried)", prompt.ErrTimeout)
			}
			return bridge.SystemRunResult{}, hint.Wrap(fmt.Errorf("%w: approver connection lost while the command was pending (%v); the command may have run and is not retried", prompt.ErrBadReply, unwrapOp(err)), "check that `exechost approver --exec-host` is still running")
		}
		res, err, skip := verifyExecRes(c.Token, challenge, id, line)
		if skip {
			continue // an error frame about another id
		}
		return res, err
	}
}

// execReply is either frame the approver may answer an exec frame with:
// an exec-res, or an error frame (whose code and message are top-level).
// Decoding both at once parses a large result only once.
type execReply struct {
	ExecResFrame
	Code    string `json:"code"`
	Message string `json:"message"`
}

// verifyExecRes checks an answer to exec frame id against the
// connection's challenge and decodes it. An error frame wraps prompt.ErrRefused
// (skip reports one about another id, to be ignored); anything
// unverifiable wraps prompt.ErrBadReply.
func verifyExecRes(token []byte, challenge, id string, line []byte) (_ bridge.SystemRunResult, _ error, skip bool) {
	var f execReply
	if err := json.Unmarshal(line, &f); err != nil {
		return bridge.SystemRunResult{}, fmt.Errorf("%w: malformed frame", prompt.ErrBadReply), false
	}
	if f.Type == TypeError {
		if f.ID != "" && f.ID != id {
			return bridge.SystemRunResult{}, nil, true
		}
		return bridge.SystemRunResult{}, fmt.Errorf("%w: %s: %s", prompt.ErrRefused, textsafe.Bounded(f.Code, 32), textsafe.Bounded(f.Message, 200)), false
	}
	res, err := verifyExecResFrame(token, challenge, id, &f.ExecResFrame)
	return res, err, false
}

// verifyExecResFrame checks and decodes an exec-res frame.
func verifyExecResFrame(token []byte, challenge, id string, f *ExecResFrame) (bridge.SystemRunResult, error) {
	if f.Type != TypeExecRes {
		return bridge.SystemRunResult{}, fmt.Errorf("%w: unexpected frame", prompt.ErrBadReply)
	}
	if f.ID != id {
		return bridge.SystemRunResult{}, fmt.Errorf("%w: exec result for another id", prompt.ErrBadReply)
	}
	body := f.Payload
	if !f.OK {
		body = f.Error
	}
	if len(body) == 0 || (f.OK && len(f.Error) > 0) || (!f.OK && len(f.Payload) > 0) {
		return bridge.SystemRunResult{}, fmt.Errorf("%w: exec result must carry exactly one of payload and error", prompt.ErrBadReply)
	}
	if !macEqual(f.HMAC, ExecResultMAC(token, challenge, id, body)) {
		return bridge.SystemRunResult{}, hint.Wrap(fmt.Errorf("%w: exec result hmac does not verify", prompt.ErrBadReply), "approver and node must share exec-approvals.json's token")
	}
	if !f.OK {
		var xe bridge.Error
		if err := json.Unmarshal(body, &xe); err != nil || xe.Code == "" {
			return bridge.SystemRunResult{}, fmt.Errorf("%w: malformed exec error", prompt.ErrBadReply)
		}
		xe.Code = textsafe.Bounded(xe.Code, 64)
		if xe.Message == "" {
			xe.Message = xe.Code
		}
		return bridge.SystemRunResult{}, &xe
	}
	var res struct {
		bridge.SystemRunResult
		ExitCode *int `json:"exitCode"` // required: tells a payload from an error
	}
	if err := json.Unmarshal(body, &res); err != nil || res.ExitCode == nil {
		return bridge.SystemRunResult{}, fmt.Errorf("%w: malformed exec payload", prompt.ErrBadReply)
	}
	out := res.SystemRunResult
	out.ExitCode = *res.ExitCode
	return out, nil
}
