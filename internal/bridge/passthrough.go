package bridge

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// A system.run result's stdout and stderr are most of its bytes, and the
// gateway only passes them on: decoded from the node's frame, they go
// straight back out in the exec result to the agent. Escaping them again
// for that second frame is the costliest step of the gateway's hop, so a
// result decoded through KeepingWire also keeps the two JSON strings as
// the node sent them, and an ExecResult carrying that result splices them
// in unchanged — as long as its Stdout and Stderr are still the text they
// decode to. The wire does not change: the same JSON strings, read by any
// decoder as the same text the gateway read.

// outputWire holds a result's stdout and stderr as JSON strings beside
// the text they decoded to.
type outputWire struct {
	stdoutText, stderrText string
	stdoutJSON, stderrJSON []byte
}

// KeepingWire returns the value to decode a system.run result into with
// Unmarshal so that r keeps its stdout and stderr as they arrived, for an
// ExecResult built from r to send on without escaping them again. A
// result read this way holds its output twice (text and JSON) until
// its Wire is cleared.
func KeepingWire(r *SystemRunResult) any { return keepingWireOf(r, nil) }

// keepingWireOf is KeepingWire for decoding from frame, bytes that are
// the caller's to give away: JSON kept from within them shares their
// bytes instead of being copied (a run's output is up to MaxOutput).
func keepingWireOf(r *SystemRunResult, frame []byte) any {
	r.Wire = &outputWire{}
	return &runResultIn{
		SystemRunResult: r,
		Stdout:          wireText{text: &r.Stdout, json: &r.Wire.stdoutJSON, was: &r.Wire.stdoutText, frame: frame},
		Stderr:          wireText{text: &r.Stderr, json: &r.Wire.stderrJSON, was: &r.Wire.stderrText, frame: frame},
	}
}

// runResultIn decodes a SystemRunResult whose stdout and stderr go
// through wireText: the outer fields win over the embedded ones of the
// same name, every other field decodes into the result as usual.
type runResultIn struct {
	*SystemRunResult
	Stdout wireText `json:"stdout"`
	Stderr wireText `json:"stderr"`
}

// wireText decodes one JSON string into text, as Unmarshal would, and
// with json set keeps a copy of the string's JSON.
type wireText struct {
	text *string
	json *[]byte // nil: keep nothing (OutputInto)
	was  *string // the text the JSON decoded to
	// frame is what the decoder reads when its bytes are ours to keep
	// (keepingWireOf): JSON found within it is kept without a copy.
	frame []byte
}

// UnmarshalJSON implements the v1 Unmarshaler: data is one JSON value,
// already checked by the decoder calling it; null leaves the field as it
// is, as Unmarshal does for a string.
func (w *wireText) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	if len(data) == 0 || data[0] != '"' {
		return errors.New("stdout and stderr must be strings")
	}
	// What unquoteFast leaves (invalid UTF-8, an escaped surrogate, which
	// Unmarshal replaces or pairs) takes Unmarshal's way.
	if s, ok := unquoteFast(data); ok {
		*w.text = s
	} else if err := Unmarshal(data, w.text); err != nil {
		return err
	}
	if w.json != nil {
		if within(data, w.frame) {
			*w.json = data[:len(data):len(data)]
		} else {
			*w.json = bytes.Clone(data) // the decoder's buffer, not ours to keep
		}
		*w.was = *w.text
	}
	return nil
}

// within reports whether sub's bytes lie inside whole's: whether a value
// the decoder hands over is a piece of the input rather than of a buffer
// of its own, which nothing in its API promises.
func within(sub, whole []byte) bool {
	if len(sub) == 0 || len(whole) == 0 {
		return false
	}
	s, w := uintptr(unsafe.Pointer(unsafe.SliceData(sub))), uintptr(unsafe.Pointer(unsafe.SliceData(whole)))
	return s >= w && s+uintptr(len(sub)) <= w+uintptr(len(whole))
}

// OutputInto returns the value to decode an exec result into with
// Unmarshal so that its stdout and stderr are unquoted by unquoteFast:
// what an agent's Call does with an exec's answer (Conn.deliverTyped).
// The result is the one Unmarshal(data, r) gives.
func OutputInto(r *ExecResult) any {
	return &execResultIn{
		ExecResult: r,
		Stdout:     wireText{text: &r.Stdout},
		Stderr:     wireText{text: &r.Stderr},
	}
}

// execResultIn is runResultIn for an ExecResult: its own stdout and
// stderr fields are shallower than the embedded result's and win.
type execResultIn struct {
	*ExecResult
	Stdout wireText `json:"stdout"`
	Stderr wireText `json:"stderr"`
}

// unquoteFast returns the text of data, a JSON string the decoder has
// checked, as Unmarshal would: the runs between escapes are copied whole
// (found with bytes.IndexByte), each written once into a string of the
// right size. It reports false, for the decoder to do it, for data that
// is not valid UTF-8 or escapes a surrogate (half of a pair, or alone):
// Unmarshal replaces or pairs those.
func unquoteFast(data []byte) (string, bool) {
	if len(data) < 2 || data[0] != '"' || data[len(data)-1] != '"' {
		return "", false
	}
	in := data[1 : len(data)-1]
	if !utf8.Valid(in) {
		return "", false
	}
	var sb strings.Builder
	sb.Grow(len(in))
	for {
		i := bytes.IndexByte(in, '\\')
		if i < 0 {
			sb.Write(in)
			return sb.String(), true
		}
		sb.Write(in[:i])
		if i+1 >= len(in) {
			return "", false
		}
		n := 2
		switch c := in[i+1]; c {
		case '"', '\\', '/':
			sb.WriteByte(c)
		case 'b':
			sb.WriteByte('\b')
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'u':
			r, ok := hex4(in[i+2:])
			if !ok || utf16.IsSurrogate(r) {
				return "", false
			}
			sb.WriteRune(r)
			n = 6
		default:
			return "", false
		}
		in = in[i+n:]
	}
}

// hex4 reads the four hex digits b starts with.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// outputFields is how Marshal writes an ExecResult's empty stdout and
// stderr: the two fields are adjacent, and this text cannot occur inside
// an encoded string (every quote there is escaped) nor, as a key pair,
// before the result's own fields.
const outputFields = `"stdout":"","stderr":""`

// appendWire encodes r as Marshal would. When r's output is still what
// KeepingWire decoded, the JSON it kept is spliced in rather than the
// text escaped again; otherwise the text is escaped by appendQuoted.
func (r ExecResult) appendWire(dst []byte) []byte {
	w := r.Wire
	kept := w != nil && r.Stdout == w.stdoutText && r.Stderr == w.stderrText && w.stdoutJSON != nil && w.stderrJSON != nil
	shell := r
	shell.Stdout, shell.Stderr, shell.Wire = "", "", nil
	b, _ := Marshal(shell) // strings, numbers and bools always encode
	i := bytes.Index(b, []byte(outputFields))
	if i < 0 { // not Marshal's layout after all: take no chances
		b, _ = Marshal(r)
		return append(dst, b...)
	}
	need := len(b) + len(r.Stdout) + len(r.Stderr) + len(r.Stdout)/16 + 16
	if kept {
		need = len(b) + len(w.stdoutJSON) + len(w.stderrJSON)
	}
	if cap(dst)-len(dst) < need {
		dst = append(make([]byte, 0, len(dst)+need), dst...)
	}
	dst = append(dst, b[:i]...)
	dst = append(dst, `"stdout":`...)
	if kept {
		dst = append(dst, w.stdoutJSON...)
	} else {
		dst = appendQuoted(dst, r.Stdout)
	}
	dst = append(dst, `,"stderr":`...)
	if kept {
		dst = append(dst, w.stderrJSON...)
	} else {
		dst = appendQuoted(dst, r.Stderr)
	}
	return append(dst, b[i+len(outputFields):]...)
}

// appendWire encodes r as Marshal would (fields in struct order, empty
// droppedBytes and error omitted), its output through appendQuoted: how
// a node writes its system.run result, straight into its answer's frame
// (InvokeOK).
func (r SystemRunResult) appendWire(dst []byte) []byte {
	// Room for the output with an escape every 16 bytes, grown once.
	if n := len(r.Stdout) + len(r.Stderr) + len(r.Error); cap(dst)-len(dst) < n+n/16+160 {
		dst = append(make([]byte, 0, len(dst)+n+n/16+160), dst...)
	}
	dst = append(dst, `{"exitCode":`...)
	dst = strconv.AppendInt(dst, int64(r.ExitCode), 10)
	dst = append(dst, `,"timedOut":`...)
	dst = strconv.AppendBool(dst, r.TimedOut)
	dst = append(dst, `,"success":`...)
	dst = strconv.AppendBool(dst, r.Success)
	dst = append(dst, `,"stdout":`...)
	dst = appendQuoted(dst, r.Stdout)
	dst = append(dst, `,"stderr":`...)
	dst = appendQuoted(dst, r.Stderr)
	dst = append(dst, `,"truncated":`...)
	dst = strconv.AppendBool(dst, r.Truncated)
	if r.DroppedBytes != 0 {
		dst = append(dst, `,"droppedBytes":`...)
		dst = strconv.AppendInt(dst, r.DroppedBytes, 10)
	}
	if r.Error != "" {
		dst = append(dst, `,"error":`...)
		dst = appendQuoted(dst, r.Error)
	}
	return append(dst, '}')
}
