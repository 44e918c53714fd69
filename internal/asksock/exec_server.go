package asksock

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/textsafe"
)

// ExecDefaultTimeout bounds a forwarded command that carries no timeoutMs,
// as the node runner bounds its own runs.
const ExecDefaultTimeout = 30 * time.Minute

// execGrace is added to a forwarded command's timeout for the approver's
// own bound on one exec: time for a human to answer a prompt plus the
// runner's kill and output grace.
const execGrace = DefaultPromptTimeout + 30*time.Second

// execJob is one authenticated exec frame, admitted on its connection.
type execJob struct {
	id  string
	req bridge.SystemRunParams
}

// frameType returns a frame's "type" ("" when it is not a JSON object).
func frameType(line []byte) string {
	var t struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(line, &t) != nil {
		return ""
	}
	return t.Type
}

// handleExec authenticates one exec frame and, once admitted, runs it on
// its own goroutine (tracked by wg) so the connection keeps reading. It
// reports false when the connection must close.
func (cn *conn) handleExec(ctx context.Context, line []byte, wg *sync.WaitGroup) bool {
	x, code, msg := cn.verifyExec(line)
	if code != "" {
		cn.refuse(x.id, code, msg)
		cn.mu.Lock()
		full := len(cn.nonces) >= maxNoncesPerConn
		cn.mu.Unlock()
		return !(code == CodeRateLimited && full)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		cn.exec(ctx, x)
	}()
	return true
}

// verifyExec authenticates an exec frame exactly as verify does a prompt
// (shape, hmac, ts, nonce, per-connection limits) and decodes its request.
// Only a frame that passes all of it is answered with a signed exec-res;
// every refusal here is an unsigned error frame, and nothing runs.
func (cn *conn) verifyExec(line []byte) (execJob, string, string) {
	f, replyID, _, code, msg := cn.authenticate(line, TypeExec)
	if code != "" {
		return execJob{id: replyID}, code, msg
	}
	x := execJob{id: f.ID}
	if cn.s.Exec == nil {
		return x, CodeBadRequest, "this approver is not an exec host (hint: start it with `exechost approver --exec-host`)"
	}
	if err := json.Unmarshal(f.Request, &x.req); err != nil {
		return x, CodeBadRequest, "malformed exec request object"
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if code, msg := cn.admitLocked(f); code != "" {
		return x, code, msg
	}
	cn.pending[f.ID] = true
	cn.armDeadlineLocked()
	return x, "", ""
}

// exec runs one admitted exec and writes its signed exec-res. The command
// is killed when the connection closes (the caller is gone) or the server
// stops.
func (cn *conn) exec(ctx context.Context, x execJob) {
	defer func() {
		cn.mu.Lock()
		delete(cn.pending, x.id)
		cn.armDeadlineLocked()
		cn.mu.Unlock()
	}()
	limit := ExecDefaultTimeout
	if x.req.TimeoutMs > 0 {
		limit = time.Duration(x.req.TimeoutMs) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(ctx, limit+execGrace)
	defer cancel()
	ctx = withExecPeer(ctx, cn.peer.String())

	var (
		res bridge.SystemRunResult
		err = checkExecRequest(&x.req)
	)
	if err == nil {
		res, err = cn.s.Exec.Exec(ctx, x.req)
	}
	ok := err == nil
	var body []byte
	if !ok {
		xe := bridge.AsError(err)
		cn.s.logf("approver: %s: exec %s not run: %s: %s", cn.peer, x.id, xe.Code, textsafe.Bounded(xe.Message, 200))
		body, err = json.Marshal(xe)
	} else {
		body, err = json.Marshal(res)
	}
	if err != nil { // cannot happen for these plain structs; never send it unsigned
		cn.s.logf("approver: %s: exec %s: encode result: %v", cn.peer, x.id, err)
		return
	}
	if err := cn.writeLine(execResLine(x.id, ok, body, ExecResultMAC(cn.s.Token, cn.challenge, x.id, body))); err != nil {
		cn.s.logf("approver: %s: exec %s: result not delivered: %v", cn.peer, x.id, err)
	}
}

// execResLine encodes an exec-res frame around body, the exact bytes the
// hmac covers. It is assembled by hand so a result of up to a few MiB is
// not re-validated and copied by json.Marshal; id passed validID and
// hmac is hex, so neither needs escaping.
func execResLine(id string, ok bool, body []byte, hmac string) []byte {
	field := "error"
	if ok {
		field = "payload"
	}
	b := make([]byte, 0, len(body)+len(id)+len(hmac)+80)
	b = fmt.Appendf(b, `{"type":%q,"id":%q,"ok":%t,%q:`, TypeExecRes, id, ok, field)
	b = append(b, body...)
	b = fmt.Appendf(b, `,"hmac":%q}`, hmac)
	return append(b, '\n')
}

// writeLine sends one encoded frame (newline included); writes are
// serialised with cn.write's and bounded in time.
func (cn *conn) writeLine(line []byte) error {
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	cn.c.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := cn.c.Write(line)
	return err
}

// execPeerKey carries the forwarding peer's description to the in-process
// prompter, so the approver's queue says where a prompt came from.
type execPeerKey struct{}

func withExecPeer(ctx context.Context, peer string) context.Context {
	return context.WithValue(ctx, execPeerKey{}, peer)
}

func execPeer(ctx context.Context) string {
	p, _ := ctx.Value(execPeerKey{}).(string)
	return p
}
