package bridge

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Codec is the wire's decoder with its fast paths: the ways a frame that
// carries a command's output is read in fewer passes than the plain path
// (DecodeFrame, then Unmarshal of its params or payload) would take.
//
//   - a request or event laid out as this build writes it, named by
//     Options.CheckedByHandler, is cut apart without the frame decoder
//     (Codec.DecodeFrame; the handler's Unmarshal checks the params);
//   - a response to a pending Call is decoded in one pass, payload straight
//     into the Call's result (decodeResponse, for Conn.deliverTyped);
//   - a node's system.run answer is decoded in one pass, payload straight
//     into a SystemRunResult that keeps its output's JSON (PeekInvokeID,
//     DecodeRunResult, for the gateway);
//   - an output string is unquoted without the decoder once the decoder has
//     checked it (unquoteFast, through KeepingWire and OutputInto);
//   - the encoders beside them write Marshal's bytes faster (appendQuoted,
//     SystemRunResult.appendWire, ExecResult.appendWire, Frame.appendJSON).
//
// Its contract, held by one differential fuzz harness (FuzzCodec): for any
// bytes, whatever a fast path accepts decodes to what the plain path
// (DecodeFrame, UnmarshalOwn, Unmarshal) makes of them, and whatever the
// plain path refuses a fast path refuses too or leaves to the plain path;
// the encoders give Marshal's bytes. The zero Codec checks no name by
// handler: its DecodeFrame is DecodeFrame.
type Codec struct {
	checkedByHandler func(name string) bool
}

// NewCodec returns the codec of a connection whose handler decodes, and so
// checks, the params or payload of the frames checkedByHandler names (nil:
// none; see Options.CheckedByHandler).
func NewCodec(checkedByHandler func(name string) bool) Codec {
	return Codec{checkedByHandler: checkedByHandler}
}

// DecodeFrame reads one frame: by its layout when it is one the handler
// checks (params or payload then left unchecked, for the handler's
// Unmarshal), otherwise with the package's DecodeFrame.
func (c Codec) DecodeFrame(data []byte) (Frame, error) {
	if f, ok := c.decodeLaidOut(data); ok {
		return f, nil
	}
	return DecodeFrame(data)
}

// The layouts appendJSON gives a request and an event, which
// decodeLaidOut reads without a decoder.
const (
	reqPrefix    = `{"type":"req","id":"`
	methodInfix  = `","method":"`
	paramsInfix  = `","params":`
	eventPrefix  = `{"type":"event","payload":`
	eventInfix   = `,"event":"`
	seqInfix     = `","seq":`
	maxLaidOutNm = 64 // longer names take DecodeFrame's path
)

// decodeLaidOut reads a request or event named by checkedByHandler from
// the layout appendJSON gives it — a request's fields in the order type,
// id, method, params and nothing after; an event's type, payload, event,
// seq — leaving the params or payload unchecked for the handler's decode,
// which checks it. It reports false, leaving the frame to DecodeFrame, for
// anything else: another layout, another name, an escaped or overlong id
// or name, invalid UTF-8, an oversized frame.
func (c Codec) decodeLaidOut(data []byte) (Frame, bool) {
	if c.checkedByHandler == nil || len(data) > MaxFrame || !bytes.HasSuffix(data, []byte("}")) {
		return Frame{}, false
	}
	body := data[:len(data)-1]
	var f Frame
	if rest, ok := bytes.CutPrefix(body, []byte(reqPrefix)); ok {
		var id, method []byte
		if id, rest, ok = cutName(rest, methodInfix, MaxIDLen); !ok {
			return Frame{}, false
		}
		if method, rest, ok = cutName(rest, paramsInfix, maxLaidOutNm); !ok {
			return Frame{}, false
		}
		f = Frame{Type: TypeReq, ID: string(id), Method: string(method), Params: rest}
	} else if rest, ok := bytes.CutPrefix(body, []byte(eventPrefix)); ok {
		// The payload is everything up to the last ,"event":" — the
		// frame's own field, which comes after it.
		i := bytes.LastIndex(rest, []byte(eventInfix))
		if i < 0 {
			return Frame{}, false
		}
		name, seq, ok := cutName(rest[i+len(eventInfix):], seqInfix, maxLaidOutNm)
		if !ok || len(seq) == 0 || len(seq) > 20 {
			return Frame{}, false
		}
		n, err := strconv.ParseUint(string(seq), 10, 64)
		if err != nil || seq[0] == '0' {
			return Frame{}, false
		}
		f = Frame{Type: TypeEvent, Event: string(name), Payload: rest[:i], Seq: n}
	} else {
		return Frame{}, false
	}
	name := f.Method + f.Event
	if len(f.Params)+len(f.Payload) == 0 || !c.checkedByHandler(name) || f.validate() != nil || !utf8.Valid(data) {
		return Frame{}, false
	}
	return f, true
}

// cutName cuts a JSON string's content, plain (no escapes) and at most max
// bytes, followed by infix, off the front of b.
func cutName(b []byte, infix string, max int) (name, rest []byte, ok bool) {
	i := bytes.Index(b[:min(len(b), max+len(infix))], []byte(infix))
	if i <= 0 || bytes.IndexByte(b[:i], '\\') >= 0 || bytes.IndexByte(b[:i], '"') >= 0 {
		return nil, nil, false
	}
	return b[:i], b[i+len(infix):], true
}

// resPrefix is how every response this build writes begins (see
// Frame.appendJSON), which lets the read loop find the waiting Call before
// decoding.
const resPrefix = `{"type":"res","id":"`

// runResultPrefix is how a node's system.run answer begins
// (InvokeResult's encoding puts the id first), which lets the gateway find
// the waiting invoke before decoding.
const runResultPrefix = `{"id":"`

// peekID returns the plain (unescaped, non-empty, at most MaxIDLen bytes)
// string data starts with after prefix; ok is false for anything else.
func peekID(data []byte, prefix string) (id string, ok bool) {
	rest, found := bytes.CutPrefix(data, []byte(prefix))
	if !found || len(data) > MaxFrame {
		return "", false
	}
	end := bytes.IndexByte(rest[:min(len(rest), MaxIDLen+1)], '"')
	if end <= 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return "", false
	}
	return string(rest[:end]), true
}

// responseID returns the id of a response laid out as this build writes
// it, without decoding it.
func (Codec) responseID(data []byte) (string, bool) { return peekID(data, resPrefix) }

// decodeResponse decodes the response data to the Call id whose result is
// of type out, in one pass, the payload straight into a fresh *out,
// instead of decoding the frame and then its payload (each a validation
// scan and a decode of the whole payload: for an exec result, the whole
// output). It reports false, leaving the frame to DecodeFrame, for
// anything it does not handle: another shape or id, a payload that does
// not fit.
func (Codec) decodeResponse(data []byte, id string, out reflect.Type) (response, bool) {
	if len(data) > MaxFrame || !utf8.Valid(data) {
		return response{}, false
	}
	value := reflect.New(out)
	into := value.Interface()
	if r, ok := into.(*ExecResult); ok {
		into = OutputInto(r) // an exec's output, unquoted the fast way
	}
	var fr struct {
		Type    string      `json:"type"`
		ID      string      `json:"id"`
		OK      *bool       `json:"ok"`
		Payload presentInto `json:"payload"`
		Error   *Error      `json:"error"`
	}
	fr.Payload.v = into
	unmarshal := Unmarshal
	if out.PkgPath() == ownPkg {
		unmarshal = UnmarshalOwn // a type TestWireTypesDecode tries
	}
	if err := unmarshal(data, &fr); err != nil {
		return response{}, false
	}
	f := Frame{Type: fr.Type, ID: fr.ID, OK: fr.OK, Error: fr.Error}
	if f.Type != TypeRes || f.ID != id || f.validate() != nil {
		return response{}, false
	}
	r := response{f: f}
	// A missing or null payload leaves the result untouched, as the
	// plain path does.
	if *f.OK && fr.Payload.seen {
		r.value = value
	}
	return r, true
}

// presentInto decodes a member's value into v in the same pass as the
// object around it, and records whether the member was there and not
// null: a missing or null member leaves v as it was.
type presentInto struct {
	v    any
	seen bool
}

// UnmarshalJSONFrom implements jsonv2.UnmarshalerFrom: the value is
// decoded under the caller's options, straight from its decoder.
func (p *presentInto) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if dec.PeekKind() == 'n' {
		_, err := dec.ReadToken()
		return err
	}
	p.seen = true
	return jsonv2.UnmarshalDecode(dec, p.v)
}

// PeekInvokeID returns the id of a node.invoke.result's params encoded as
// this build's nodes encode them, without decoding the rest, so that the
// gateway finds the invoke waiting for it; ok is false for any other
// shape (another encoder, an escaped id), which takes the plain path.
func (Codec) PeekInvokeID(params []byte) (id string, ok bool) {
	return peekID(params, runResultPrefix)
}

// DecodeRunResult decodes a node's answer to system.run invoke id (the
// params of its node.invoke.result) in one pass, the payload straight into
// a SystemRunResult read through KeepingWire, instead of decoding the
// InvokeResult and then its payload (each a validation scan and a decode
// of the whole output). run is nil when the node reports a failure. An
// answer whose id is not id, or that is ok without a result object, is an
// error: the plain path would not read a result from it either. params
// is given away: run's output as it came (its Wire) shares its bytes, so
// they must not change once passed (a frame's, read once and never
// written).
func (Codec) DecodeRunResult(params []byte, id string) (res InvokeResult, run *SystemRunResult, err error) {
	run = new(SystemRunResult)
	var r struct {
		ID      string      `json:"id"`
		NodeID  string      `json:"nodeId"`
		OK      bool        `json:"ok"`
		Payload presentInto `json:"payload,omitempty"`
		Error   *Error      `json:"error,omitempty"`
	}
	r.Payload.v = keepingWireOf(run, params) // the output goes on to the agent as it came
	if err := UnmarshalOwn(params, &r); err != nil {
		return InvokeResult{}, nil, err
	}
	if r.ID != id {
		return InvokeResult{}, nil, fmt.Errorf("invoke result id %q is not the one it starts with", r.ID)
	}
	res = InvokeResult{ID: r.ID, NodeID: r.NodeID, OK: r.OK, Error: r.Error}
	if !r.OK {
		return res, nil, nil
	}
	if !r.Payload.seen {
		return InvokeResult{}, nil, errors.New("system.run answered ok without a result object")
	}
	return res, run, nil
}
