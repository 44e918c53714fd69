package asksock

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// FuzzServerFrame feeds arbitrary lines to the server's frame parser: it
// must not panic, and it may accept a frame only when the frame carries a
// valid hmac for this connection's challenge.
func FuzzServerFrame(f *testing.F) {
	const challenge = "00112233445566778899aabbccddeeff"
	now := time.UnixMilli(1_700_000_000_000)
	valid := newFrame(challenge, sampleRequest)
	valid.TS = now.UnixMilli()
	valid.HMAC = RequestMAC(testToken, challenge, valid.Nonce, valid.TS, valid.Request)
	f.Add(valid.bytes())
	f.Add(valid.rawBytes())
	f.Add([]byte(`{"type":"request","id":"x","ts":0,"nonce":"","request":{},"hmac":""}`))
	f.Add([]byte(`{"type":"request","request":{"command":"ls"},"REQUEST":{"command":"rm"}}`))
	f.Add([]byte("garbage"))
	f.Add([]byte(`[]`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, line []byte) {
		s := &Server{Token: testToken, Now: func() time.Time { return now }}
		cn := &conn{s: s, c: nopConn{}, challenge: challenge, pending: map[string]bool{}, nonces: map[string]struct{}{}}
		p, code, _ := cn.verify(line)
		if code != "" {
			return
		}
		var fr RequestFrame
		if err := json.Unmarshal(line, &fr); err != nil {
			t.Fatalf("accepted a frame that does not parse: %q", line)
		}
		if !macEqual(fr.HMAC, RequestMAC(testToken, challenge, fr.Nonce, fr.TS, fr.Request)) {
			t.Fatalf("accepted a frame without a valid hmac: %q", line)
		}
		if p.ID != fr.ID || !validID(p.ID) {
			t.Fatalf("queued id %q for frame id %q", p.ID, fr.ID)
		}
		// The same frame again is a replay.
		if _, code, _ := cn.verify(line); code != CodeReplay {
			t.Fatalf("second copy: code %q, want replay", code)
		}
	})
}

// FuzzReadLine checks the frame splitter: never a line over the limit,
// and every returned line is a prefix-free piece of the input.
func FuzzReadLine(f *testing.F) {
	f.Add([]byte("a\nb\r\n\n"), 4)
	f.Add(bytes.Repeat([]byte("x"), 5000), 4096)
	f.Add([]byte("{\"type\":\"hello\"}\n"), 1)
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		if max <= 0 || max > 1<<16 {
			return
		}
		r := bufio.NewReaderSize(bytes.NewReader(in), 16)
		for {
			line, err := readLine(r, max)
			if err != nil {
				if !errors.Is(err, errTooLarge) && len(line) != 0 {
					t.Fatalf("error %v with data %q", err, line)
				}
				return
			}
			if len(line) > max {
				t.Fatalf("line of %d bytes over limit %d", len(line), max)
			}
			if bytes.IndexByte(line, '\n') >= 0 {
				t.Fatalf("line contains a newline: %q", line)
			}
		}
	})
}
