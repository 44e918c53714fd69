package bridge

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// BenchmarkChannel measures what the sealed channel costs beside the plain
// frame, in the same run: a call's round trip over a real loopback
// WebSocket (plain and sealed, a small frame and a 100 KB one), the
// sealing and opening of one frame alone, and the key exchange a
// connection adds (two X25519 keys, two ECDH, four HKDF keys).
//
//	go test ./internal/bridge -run '^$' -bench Channel -benchtime 2s
func BenchmarkChannel(b *testing.B) {
	echo := func(ctx context.Context, method string, params json.RawMessage) (any, error) {
		return json.RawMessage(params), nil
	}
	for _, size := range []int{200, 100_000} {
		arg := strings.Repeat("x", size)
		name := map[int]string{200: "200B", 100_000: "100KB"}[size]
		for _, sealed := range []bool{false, true} {
			mode := map[bool]string{false: "plain", true: "sealed"}[sealed]
			b.Run("roundtrip/"+name+"/"+mode, func(b *testing.B) {
				so, co := Options{OnRequest: echo, NoPing: true}, Options{NoPing: true}
				if sealed {
					so.Channel, co.Channel = channelPair(b)
				}
				_, cli := pair(b, so, co)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				b.SetBytes(int64(size))
				for b.Loop() {
					var out string
					if err := cli.Call(ctx, "echo", arg, &out); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run("seal+open/"+name, func(b *testing.B) {
			gw, cl := channelPair(b)
			f, _ := NewRequest("1", "echo", arg)
			plain, _ := f.appendJSON(nil)
			buf := make([]byte, 0, len(plain)+SealOverhead)
			b.SetBytes(int64(size))
			for b.Loop() {
				sealed := cl.seal.Seal(buf[:0], seqNonce(cl.sendSeq), plain, nil)
				cl.sendSeq++
				if _, err := gw.openSealed(sealed); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("encode+decode-plain/"+name, func(b *testing.B) {
			f, _ := NewRequest("1", "echo", arg)
			b.SetBytes(int64(size))
			for b.Loop() {
				data, _ := f.appendJSON(nil)
				if _, err := DecodeFrame(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("connection-keys", func(b *testing.B) {
		for b.Loop() {
			channelPair(b)
		}
	})
}
