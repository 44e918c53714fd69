package agent

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"
)

// FuzzFrames feeds arbitrary bytes to the frame reader and message decoder
// of both directions: it must never panic, never return a body beyond
// MaxFrame, and a frame that decodes must have been framed exactly.
func FuzzFrames(f *testing.F) {
	frame := func(mac, body []byte) []byte {
		var b bytes.Buffer
		writeFrame(&b, mac, body)
		return b.Bytes()
	}
	key := bytes.Repeat([]byte{1}, keySize)
	exec := encode(request{Type: typeExec, ID: 1, Argv: []string{"true"}})
	f.Add(frame(frameMAC(key, 1, exec), exec), true)
	f.Add(frame(nil, encode(reply{Type: typeResult, ID: 1, Stdout: []byte("\xff")})), false)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, false)
	f.Add([]byte{0, 0, 0, 2, '{', '}'}, false)
	f.Fuzz(func(t *testing.T, data []byte, fromGateway bool) {
		macLen := 0
		if fromGateway {
			macLen = macSize
		}
		r := bytes.NewReader(data)
		for {
			before := r.Len()
			mac, body, err := readFrame(r, macLen)
			if err != nil {
				return
			}
			if len(body) > MaxFrame || len(mac) != macLen {
				t.Fatalf("frame of %d bytes, mac %d", len(body), len(mac))
			}
			if got := before - r.Len(); got != 4+macLen+len(body) || int(binary.BigEndian.Uint32(data[len(data)-before:])) != len(body) {
				t.Fatalf("consumed %d bytes for a %d-byte body", got, len(body))
			}
			if fromGateway {
				var req request
				_ = json.Unmarshal(body, &req)
			} else {
				var rep reply
				_ = json.Unmarshal(body, &rep)
			}
		}
	})
}
