package bridge

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// BenchmarkOutputHops times each JSON step a command's output takes from
// node to agent, with the bench's text (lines of hex digits) at 100 KB
// and at the 200,000-byte cap, which is what a 1 MB output carries: the
// node's encoding of its result and of the exec.finished event's tail,
// the gateway's decode of both and its encoding of the exec result, and
// the agent's decode of that. `go run ./bench -only output` has the round
// trips these add up to.
func BenchmarkOutputHops(b *testing.B) {
	line := strings.Repeat("0123456789abcdef", 7) + "\n"
	for _, size := range []int{100_000, 200_000} {
		out := strings.Repeat(line, size/len(line)+1)[:size]
		tail := out[len(out)-20_000:]
		res := SystemRunResult{Stdout: out, Success: true}
		payload, _ := Marshal(res)
		ev, _ := Marshal(ExecEvent{RunID: "r1", Host: "node", Tail: tail})
		name := map[int]string{100_000: "100KB", 200_000: "200KB"}[size]
		for _, e := range []struct {
			name    string
			marshal func(any) ([]byte, error)
		}{{"node-encode-result", func(v any) ([]byte, error) { return MarshalPayload(v) }}, {"node-encode-result-Marshal", Marshal}} {
			b.Run(name+"/"+e.name, func(b *testing.B) {
				b.SetBytes(int64(size))
				for b.Loop() {
					p, _ := e.marshal(res)
					f, _ := NewRequest("1", MethodInvokeResult, InvokeResult{ID: "i", NodeID: "n", OK: true, Payload: p})
					if _, err := f.appendJSON(nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(name+"/node-encode-event", func(b *testing.B) {
			for b.Loop() {
				f, _ := NewEvent(MethodNodeEvent, ExecEvent{RunID: "r1", Host: "node", Tail: tail}, 1)
				buf, _ := f.appendJSON(nil)
				_ = buf
			}
		})
		b.Run(name+"/gateway-decode-result", func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				_ = utf8.Valid(payload)
				var r SystemRunResult
				if err := Unmarshal(payload, KeepingWire(&r)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/gateway-decode-event", func(b *testing.B) {
			for b.Loop() {
				_ = utf8.Valid(ev)
				var e ExecEvent
				if err := Unmarshal(ev, &e); err != nil {
					b.Fatal(err)
				}
			}
		})
		var kept SystemRunResult
		if err := Unmarshal(payload, KeepingWire(&kept)); err != nil {
			b.Fatal(err)
		}
		events := []SystemEvent{{Text: "Exec started"}, {Text: "Exec finished (node=n, id=r1, code=0)\n" + tail}}
		b.Run(name+"/gateway-encode-exec-result", func(b *testing.B) {
			for b.Loop() {
				f, _ := NewResult("1", ExecResult{Status: ExecCompleted, RunID: "r1", Host: "node", SystemRunResult: kept, Events: events})
				buf, _ := f.appendJSON(nil)
				_ = buf
			}
		})
		b.Run(name+"/gateway-encode-exec-result-no-tail", func(b *testing.B) {
			ev2 := []SystemEvent{{Text: "Exec started"}, {Text: "Exec finished (node=n, id=r1, code=0)"}}
			for b.Loop() {
				f, _ := NewResult("1", ExecResult{Status: ExecCompleted, RunID: "r1", Host: "node", SystemRunResult: kept, Events: ev2})
				buf, _ := f.appendJSON(nil)
				_ = buf
			}
		})
		f, _ := NewResult("1", ExecResult{Status: ExecCompleted, RunID: "r1", Host: "node", SystemRunResult: kept, Events: events})
		frame, _ := f.appendJSON(nil)
		for _, d := range []struct {
			name string
			into func(*ExecResult) any
		}{{"agent-decode", OutputInto}, {"agent-decode-Unmarshal", func(r *ExecResult) any { return r }}} {
			b.Run(name+"/"+d.name, func(b *testing.B) {
				b.SetBytes(int64(len(frame)))
				for b.Loop() {
					_ = utf8.Valid(frame)
					var fr struct {
						Type    string `json:"type"`
						Payload any    `json:"payload"`
					}
					var r ExecResult
					fr.Payload = d.into(&r)
					if err := Unmarshal(frame, &fr); err != nil || len(r.Stdout) != size {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
