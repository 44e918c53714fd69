package asksock

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/bridge"
)

// FuzzExecFrame feeds arbitrary lines to the exec frame parser: it must not
// panic, and it may admit a frame only when the frame carries a valid hmac
// for this connection's challenge and a fresh nonce.
func FuzzExecFrame(f *testing.F) {
	const challenge = "00112233445566778899aabbccddeeff"
	now := time.UnixMilli(1_700_000_000_000)
	valid := newExecFrame(challenge, sampleExec)
	valid.TS = now.UnixMilli()
	valid.HMAC = RequestMAC(testToken, challenge, valid.Nonce, valid.TS, valid.Request)
	f.Add(valid.rawBytes())
	f.Add(valid.bytes())
	f.Add([]byte(`{"type":"exec","id":"x","ts":0,"nonce":"","request":{},"hmac":""}`))
	f.Add([]byte(`{"type":"exec","request":{"command":["ls"]},"REQUEST":{"command":["rm"]}}`))
	f.Add([]byte(`{"type":"exec"}`))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, line []byte) {
		s := &Server{Token: testToken, Now: func() time.Time { return now }, Exec: &recordingExecutor{}}
		cn := &conn{s: s, c: nopConn{}, challenge: challenge, pending: map[string]bool{}, nonces: map[string]struct{}{}}
		x, code, _ := cn.verifyExec(line)
		if code != "" {
			return
		}
		var fr RequestFrame
		if err := json.Unmarshal(line, &fr); err != nil || fr.Type != TypeExec {
			t.Fatalf("admitted a frame that does not parse as exec: %q", line)
		}
		if !macEqual(fr.HMAC, RequestMAC(testToken, challenge, fr.Nonce, fr.TS, fr.Request)) {
			t.Fatalf("admitted a frame without a valid hmac: %q", line)
		}
		if x.id != fr.ID || !validID(x.id) || !cn.pending[x.id] {
			t.Fatalf("admitted id %q for frame id %q", x.id, fr.ID)
		}
		if _, code, _ := cn.verifyExec(line); code != CodeReplay {
			t.Fatalf("second copy: code %q, want replay", code)
		}
	})
}

// FuzzExecRes feeds arbitrary lines to the client's exec-res verifier: it
// must not panic, and it may return a result or an *bridge.Error only for a
// frame whose hmac verifies for this challenge and id.
func FuzzExecRes(f *testing.F) {
	const challenge = "00112233445566778899aabbccddeeff"
	const id = "req-1"
	payload := []byte(`{"exitCode":0,"timedOut":false,"success":true,"stdout":"ok","stderr":"","truncated":false}`)
	ok, _ := json.Marshal(ExecResFrame{Type: TypeExecRes, ID: id, OK: true, Payload: payload, HMAC: ExecResultMAC(testToken, challenge, id, payload)})
	errBody := []byte(`{"code":"SYSTEM_RUN_DENIED","message":"SYSTEM_RUN_DENIED: user denied"}`)
	bad, _ := json.Marshal(ExecResFrame{Type: TypeExecRes, ID: id, Error: errBody, HMAC: ExecResultMAC(testToken, challenge, id, errBody)})
	f.Add(ok)
	f.Add(bad)
	f.Add([]byte(`{"type":"exec-res","id":"req-1","ok":true,"payload":{},"hmac":""}`))
	f.Add([]byte(`{"type":"exec-res","id":"req-1","ok":false,"error":null,"hmac":""}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, line []byte) {
		_, err, skip := verifyExecRes(testToken, challenge, id, line)
		var xe *bridge.Error
		if skip || (err != nil && !isExecError(err, &xe)) {
			return
		}
		var fr ExecResFrame
		if json.Unmarshal(line, &fr) != nil {
			t.Fatalf("accepted a frame that does not parse: %q", line)
		}
		body := fr.Payload
		if !fr.OK {
			body = fr.Error
		}
		if fr.ID != id || !macEqual(fr.HMAC, ExecResultMAC(testToken, challenge, id, body)) {
			t.Fatalf("accepted a frame without a valid hmac: %q", line)
		}
	})
}

func isExecError(err error, xe **bridge.Error) bool {
	e, ok := err.(*bridge.Error)
	*xe = e
	return ok
}
