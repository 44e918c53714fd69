// Package bridge is exechost's wire protocol between the gateway and its
// clients (agents, operators, nodes): JSON text frames over one WebSocket,
// shaped as the design fixes them (req/res/event), each sealed after the
// connect handshake under keys bound to it (channel.go), plus a connection type
// that correlates requests with responses, dispatches incoming requests and
// events, and fails every pending call at once when the connection drops so
// that nothing waits forever on a dead peer.
package bridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/exechost/exechost/internal/hint"
)

// Frame types.
const (
	TypeReq   = "req"
	TypeRes   = "res"
	TypeEvent = "event"
)

// Limits on untrusted frames.
const (
	// MaxFrame is the largest frame a connection reads. A system.run result
	// carries at most 200,000 bytes of output, which JSON escaping can grow
	// several-fold; 4 MiB leaves room without letting a peer exhaust memory.
	MaxFrame = 4 << 20
	// MaxIDLen bounds request ids and method and event names.
	MaxIDLen = 256
)

// Frame is one wire frame. Which fields are set depends on Type:
//
//	req:   {"type":"req","id","method","params"}
//	res:   {"type":"res","id","ok":true,"payload"} or {"type":"res","id","ok":false,"error":{"code","message"}}
//	       (error may also hold "denial" and "hint": docs/gateway.md)
//	event: {"type":"event","event","payload","seq"}
type Frame struct {
	Type    string          `json:"type"`
	ID      string          `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	OK      *bool           `json:"ok,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	Error   *Error          `json:"error,omitempty"`
	Event   string          `json:"event,omitempty"`
	Seq     uint64          `json:"seq,omitempty"`

	// body, set by NewRequest, NewResult and NewEvent for a wire type
	// that writes itself, is the frame's params (a request) or payload
	// (a result, an event) in place of Params or Payload: appendJSON
	// writes it straight into the frame's buffer, so a run's output is
	// not first copied into a json.RawMessage of its own on the way out.
	// Only this package's encoder (appendJSON) knows it: a Frame built
	// this way is for sending, never for Marshal.
	body wireAppender
}

// ErrBadFrame is wrapped by DecodeFrame for every malformed frame.
var ErrBadFrame = errors.New("bad frame")

// DecodeFrame parses and validates one frame read from a peer. It accepts
// only frames whose required fields for their type are present, so the
// rest of the code never has to second-guess a frame's shape.
func DecodeFrame(data []byte) (Frame, error) {
	var f Frame
	if len(data) > MaxFrame {
		return f, fmt.Errorf("%w: %d bytes exceeds the %d byte limit", ErrBadFrame, len(data), MaxFrame)
	}
	if !utf8.Valid(data) {
		return f, fmt.Errorf("%w: not UTF-8", ErrBadFrame)
	}
	// Unmarshal, not a Decoder: it rejects trailing data just the same
	// without first copying the whole frame (up to MaxFrame) into the
	// decoder's buffer.
	if err := UnmarshalOwn(data, &f); err != nil {
		return Frame{}, fmt.Errorf("%w: %v", ErrBadFrame, err)
	}
	if err := f.validate(); err != nil {
		return Frame{}, err
	}
	return f, nil
}

func (f *Frame) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadFrame, fmt.Sprintf(format, args...))
	}
	if len(f.ID) > MaxIDLen || len(f.Method) > MaxIDLen || len(f.Event) > MaxIDLen {
		return bad("id, method or event longer than %d bytes", MaxIDLen)
	}
	switch f.Type {
	case TypeReq:
		if f.ID == "" || f.Method == "" {
			return bad("req needs id and method")
		}
	case TypeRes:
		if f.ID == "" || f.OK == nil {
			return bad("res needs id and ok")
		}
		if !*f.OK && f.Error == nil {
			return bad("res with ok=false needs error")
		}
	case TypeEvent:
		if f.Event == "" {
			return bad("event needs event")
		}
	default:
		return bad("unknown type %q (want req, res or event)", f.Type)
	}
	return nil
}

// Error is the error object of a failed response. It implements error so a
// caller can errors.As a Call's error into it and branch on Code.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Denial explains a CodeDenied error when it is known (denial.go).
	Denial *Denial `json:"denial,omitempty"`
	// Hint is what to do about it, when the error says: the same text
	// ends Message as "(hint: …)", for readers of the message alone.
	Hint string `json:"hint,omitempty"`
	// Cause is what Errorf's %w verbs wrapped: kept in this process for
	// errors.Is and errors.As, never sent (the wire carries Code).
	Cause error `json:"-"`
}

// Error returns the message, which is written for the person or agent
// reading it.
func (e *Error) Error() string { return e.Message }

// Unwrap returns the errors Errorf wrapped with %w, so errors.Is and
// errors.As see through a wire error made in this process. An *Error
// decoded from the wire wraps nothing.
func (e *Error) Unwrap() error { return e.Cause }

// Errorf returns an *Error with code and a message formatted as
// fmt.Errorf does; errors wrapped with %w stay reachable through Unwrap,
// and the hint of one (hint.Of) is the error's Hint.
func Errorf(code, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	e := &Error{Code: code, Message: err.Error(), Hint: hint.Of(err)}
	switch err.(type) {
	case interface{ Unwrap() error }, interface{ Unwrap() []error }:
		e.Cause = err
	}
	return e
}

// ErrorHint returns Hint (hint.Hinter), so hint.Of finds a wire error's
// hint as it finds any other.
func (e *Error) ErrorHint() string { return e.Hint }

// WithHint sets e's hint and ends its message with it, as hint.Wrap
// does for any error, and returns e. An empty h changes nothing.
func (e *Error) WithHint(h string) *Error {
	if h != "" {
		e.Hint = h
		e.Message += " (hint: " + h + ")"
	}
	return e
}

// Error codes used on the wire. Clients branch on them; messages are for
// humans.
const (
	CodeInvalidRequest = "INVALID_REQUEST"
	CodeUnauthorized   = "UNAUTHORIZED"
	CodeForbidden      = "FORBIDDEN"
	CodeNotFound       = "NOT_FOUND"
	CodeUnavailable    = "UNAVAILABLE"
	CodeTimeout        = "TIMEOUT"
	CodeDenied         = "DENIED"
	CodeNodeRequired   = "NODE_REQUIRED"
	CodeAmbiguous      = "AMBIGUOUS"
	CodeStale          = "STALE"
	CodeBusy           = "BUSY"
	CodeInternal       = "INTERNAL"
)

// NewRequest builds a req frame, marshalling params.
func NewRequest(id, method string, params any) (Frame, error) {
	if a, ok := params.(wireAppender); ok {
		return Frame{Type: TypeReq, ID: id, Method: method, body: a}, nil
	}
	raw, err := marshalRaw(params)
	if err != nil {
		return Frame{}, fmt.Errorf("encode %s params: %w", method, err)
	}
	return Frame{Type: TypeReq, ID: id, Method: method, Params: raw}, nil
}

// NewResult builds a successful res frame, marshalling payload.
func NewResult(id string, payload any) (Frame, error) {
	ok := true
	if a, isA := payload.(wireAppender); isA {
		return Frame{Type: TypeRes, ID: id, OK: &ok, body: a}, nil
	}
	raw, err := marshalRaw(payload)
	if err != nil {
		return Frame{}, fmt.Errorf("encode result: %w", err)
	}
	return Frame{Type: TypeRes, ID: id, OK: &ok, Payload: raw}, nil
}

// NewFailure builds a failed res frame.
func NewFailure(id string, err error) Frame {
	ok := false
	return Frame{Type: TypeRes, ID: id, OK: &ok, Error: AsError(err)}
}

// NewEvent builds an event frame, marshalling payload.
func NewEvent(name string, payload any, seq uint64) (Frame, error) {
	if a, ok := payload.(wireAppender); ok {
		return Frame{Type: TypeEvent, Event: name, body: a, Seq: seq}, nil
	}
	raw, err := marshalRaw(payload)
	if err != nil {
		return Frame{}, fmt.Errorf("encode %s event: %w", name, err)
	}
	return Frame{Type: TypeEvent, Event: name, Payload: raw, Seq: seq}, nil
}

// marshalRaw encodes a frame's params or payload. Its result is valid JSON
// by construction, which is what lets appendJSON splice it into the frame
// without the re-scan json.Marshal gives every json.RawMessage field.
func marshalRaw(v any) (json.RawMessage, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		// Raw JSON from a caller is checked here, once: spliced in
		// unchecked, a malformed value could forge frame fields.
		if !jsontext.Value(v).IsValid() {
			return nil, errors.New("invalid raw JSON")
		}
		return v, nil
	case wireAppender:
		return v.appendWire(nil), nil
	}
	b, err := Marshal(v)
	return json.RawMessage(b), err
}

// MarshalPayload encodes v as Marshal does, for a frame's params or
// payload: a wire type that writes itself (a SystemRunResult, whose
// output it escapes faster than Marshal) does so, and raw JSON is checked.
func MarshalPayload(v any) (json.RawMessage, error) { return marshalRaw(v) }

// wireAppender is implemented by wire types that carry large raw JSON
// (InvokeResult's and NodeEvent's payloads) and encode themselves without
// re-scanning it.
type wireAppender interface {
	appendWire(dst []byte) []byte
}

// appendJSON appends f's wire encoding to dst: the same bytes Marshal
// would give (fields in struct order, empty ones omitted), except that
// Params and Payload are spliced in as they are instead of re-compacted,
// and a wire type's body (a run's result) is written in their place. They
// are valid JSON because every Frame is built by NewRequest, NewResult or
// NewEvent (through marshalRaw or a wire type's own encoder) or by
// DecodeFrame (which validated them); for a system.run result that skips
// a full scan and copy of up to a megabyte of output per hop.
func (f Frame) appendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, `{"type":`...)
	dst = appendString(dst, f.Type)
	if f.ID != "" {
		dst = append(dst, `,"id":`...)
		dst = appendString(dst, f.ID)
	}
	if f.Method != "" {
		dst = append(dst, `,"method":`...)
		dst = appendString(dst, f.Method)
	}
	switch {
	case f.body != nil && f.Type == TypeReq:
		dst = append(dst, `,"params":`...)
		dst = f.body.appendWire(dst)
	case len(f.Params) > 0:
		dst = append(dst, `,"params":`...)
		dst = append(dst, f.Params...)
	}
	if f.OK != nil {
		dst = append(dst, `,"ok":`...)
		dst = strconv.AppendBool(dst, *f.OK)
	}
	switch {
	case f.body != nil && f.Type != TypeReq:
		dst = append(dst, `,"payload":`...)
		dst = f.body.appendWire(dst)
	case len(f.Payload) > 0:
		dst = append(dst, `,"payload":`...)
		dst = append(dst, f.Payload...)
	}
	if f.Error != nil {
		b, err := Marshal(f.Error)
		if err != nil {
			return nil, err
		}
		dst = append(dst, `,"error":`...)
		dst = append(dst, b...)
	}
	if f.Event != "" {
		dst = append(dst, `,"event":`...)
		dst = appendString(dst, f.Event)
	}
	if f.Seq != 0 {
		dst = append(dst, `,"seq":`...)
		dst = strconv.AppendUint(dst, f.Seq, 10)
	}
	return append(dst, '}'), nil
}

// appendString appends s as a JSON string, escaped as Marshal does.
func appendString(dst []byte, s string) []byte {
	b, _ := Marshal(s) // a string always encodes
	return append(dst, b...)
}
