package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// ErrClosed is wrapped by every call that fails because the connection is
// gone. Pending calls fail with it at once when the peer drops.
var ErrClosed = errors.New("connection closed")

// Timeouts of a connection. Every wait has a deadline.
const (
	// WriteTimeout bounds a frame written during the connect handshake,
	// before a Conn exists.
	WriteTimeout = 10 * time.Second
	// PingInterval is how often an idle connection is probed, and
	// PingTimeout how long a probe may take before the peer counts as dead.
	// The probe also bounds a Conn's writes: a peer that stops reading
	// leaves a write stuck holding the connection's writer, the next probe
	// cannot be sent within PingTimeout, and the connection is dropped,
	// failing the stuck write (so within PingInterval + PingTimeout). A
	// timer per write would bound it more tightly, at the price of waking
	// an idle thread on every frame: tens of microseconds on a virtual
	// machine, on every hop of every exec.
	PingInterval = 15 * time.Second
	PingTimeout  = 10 * time.Second
	// maxInflight bounds concurrently handled requests per connection.
	maxInflight = 256
)

// Handler answers one request. A returned *Error goes to the peer as is;
// any other error becomes CodeInternal with its message.
type Handler func(ctx context.Context, method string, params json.RawMessage) (any, error)

// EventHandler receives one event. It runs on the read loop, so it must not
// block for long.
type EventHandler func(event string, payload json.RawMessage)

// Options configure a Conn.
type Options struct {
	// OnRequest answers requests from the peer; nil answers every request
	// with CodeNotFound.
	OnRequest Handler
	// OnEvent receives events from the peer; nil drops them.
	OnEvent EventHandler
	// Inline names the requests answered on the read loop itself, before
	// the next frame is read, rather than on a goroutine of their own:
	// for handlers that are quick and never wait on anything (the
	// gateway's node.invoke.result hands a result to the exec waiting for
	// it), saving the hand-off to a new goroutine on the way of every
	// exec's result. The answer is written from the read loop too.
	Inline func(method string) bool
	// CheckedByHandler names the requests and events whose params or
	// payload the handler decodes with Unmarshal, which checks them, and
	// never passes on as they are: the gateway's node.invoke.result and
	// node.event, which carry a command's output. Frames of these names
	// laid out as this build writes them (see Codec) skip the
	// frame decoder's own check, so that a megabyte of output is scanned
	// once, not twice, on its way through.
	CheckedByHandler func(name string) bool
	// OnClose runs once, after the connection is closed and every pending
	// call has failed, with the reason.
	OnClose func(err error)
	// NoPing disables keepalive probes (tests of raw frames).
	NoPing bool
	// pingTicks and pingTimeout replace PingInterval's ticker and
	// PingTimeout in tests, which then decide when a probe is due.
	pingTicks   <-chan time.Time
	pingTimeout time.Duration
	// Device, for Dial as role node, signs the gateway's connect
	// challenge (see Handshake); NewConn does not use it.
	Device DeviceSigner
	// Credential, for Dial as agent or operator with an issued
	// credential, signs the challenge; NewConn does not use it.
	Credential CredentialSigner
	// GatewayKey, for Dial, pins the gateway's key (ClientAuth.GatewayKey).
	GatewayKey string
	// Channel seals every frame sent and opens every frame received (see
	// channel.go); Dial sets it from the handshake, the gateway from its
	// side of it. Nil sends and reads plain JSON text frames: only for a
	// protocol without the channel (OpenClaw's) and tests of raw frames.
	Channel *Channel
}

// Conn is one established bridge connection. Calls, events and responses may
// be sent concurrently from any goroutine.
type Conn struct {
	ws    *websocket.Conn
	opts  Options
	codec Codec // reads every frame (codec.go)

	nextID  atomic.Uint64
	seq     atomic.Uint64
	mu      sync.Mutex
	pending map[string]*pendingCall

	inflight  chan struct{}
	ctx       context.Context // canceled when the connection closes
	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
	err       error // set before done is closed
	// localReason is why Close was called, so the read loop reports our
	// own reason rather than the peer's echo of it.
	localReason atomic.Pointer[error]
	// peerReason is the reason of the peer's sealed close record, if one
	// came (channel.go).
	peerReason atomic.Pointer[string]
}

// NewConn wraps an open WebSocket (after the connect handshake) and starts
// its read loop and keepalive.
func NewConn(ws *websocket.Conn, opts Options) *Conn {
	limit := int64(MaxFrame)
	if opts.Channel != nil {
		limit += SealOverhead
	}
	ws.SetReadLimit(limit)
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{
		ws:       ws,
		opts:     opts,
		codec:    NewCodec(opts.CheckedByHandler),
		pending:  make(map[string]*pendingCall),
		inflight: make(chan struct{}, maxInflight),
		ctx:      ctx,
		cancel:   cancel,
		done:     make(chan struct{}),
	}
	go c.readLoop()
	if !opts.NoPing {
		go c.pingLoop()
	}
	return c
}

// Done is closed when the connection has closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection closed, or nil while it is open.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Context returns a context canceled when the connection closes, so work
// done for this peer stops when the peer is gone.
func (c *Conn) Context() context.Context { return c.ctx }

// Close closes the connection with a normal closure and reason. Pending
// calls fail at once; the close handshake that carries the reason to the
// peer is bounded by the WebSocket library's own timeouts.
func (c *Conn) Close(reason string) error {
	why := fmt.Errorf("%w: %s", ErrClosed, reason)
	c.localReason.Store(&why)
	c.shutdown(why, false)
	wireReason := truncate(reason, maxCloseReason)
	if c.opts.Channel != nil {
		// The reason goes sealed; the close frame, which a relay could
		// read or forge, carries none.
		_ = c.opts.Channel.writeClose(c.ctx, c.ws, reason)
		wireReason = ""
	}
	err := c.ws.Close(websocket.StatusNormalClosure, wireReason)
	c.cancel()
	c.ws.CloseNow()
	if err != nil && websocket.CloseStatus(err) == -1 && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// shutdown marks the connection closed and fails pending calls. With now
// it also drops the socket and cancels the connection's context; Close
// does that itself after the close handshake.
func (c *Conn) shutdown(err error, now bool) {
	c.closeOnce.Do(func() {
		c.err = err
		close(c.done)
		if now {
			c.cancel()
			c.ws.CloseNow()
		}
		if c.opts.OnClose != nil {
			go c.opts.OnClose(err)
		}
	})
}

// Call sends a request and waits for its response, the context's end, or
// the connection's end, whichever comes first. A failed response returns
// its *Error; out (when non-nil) receives the decoded payload.
func (c *Conn) Call(ctx context.Context, method string, params, out any) error {
	id := strconv.FormatUint(c.nextID.Add(1), 10)
	f, err := NewRequest(id, method, params)
	if err != nil {
		return err
	}
	ch := make(chan response, 1)
	pc := &pendingCall{ch: ch}
	if t := reflect.TypeOf(out); t != nil && t.Kind() == reflect.Pointer && !reflect.ValueOf(out).IsNil() {
		pc.out = t.Elem()
	}
	c.mu.Lock()
	c.pending[id] = pc
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	if err := c.write(ctx, f); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r := <-ch:
		res := r.f
		if !*res.OK {
			return res.Error
		}
		if r.value.IsValid() {
			reflect.ValueOf(out).Elem().Set(r.value.Elem())
			return nil
		}
		if out != nil && len(res.Payload) > 0 {
			if err := Unmarshal(res.Payload, out); err != nil {
				return fmt.Errorf("%s: decode result: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, context.Cause(ctx))
	case <-c.done:
		return fmt.Errorf("%s: %w", method, c.err)
	}
}

// Notify sends an event to the peer.
func (c *Conn) Notify(ctx context.Context, event string, payload any) error {
	f, err := NewEvent(event, payload, c.seq.Add(1))
	if err != nil {
		return err
	}
	return c.write(ctx, f)
}

// write sends one frame. The caller's context decides only whether the
// frame is sent at all: the write itself runs under the connection's own
// context, because the WebSocket library closes the whole connection when
// a write's context ends mid-frame, and one caller giving up (a timed-out
// exec, a prompt race lost) must never drop a connection every other call
// shares. The keepalive bounds a write to a peer that stopped reading (see
// PingInterval).
func (c *Conn) write(ctx context.Context, f Frame) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	select {
	case <-c.done:
		return c.err
	default:
	}
	if c.opts.Channel != nil {
		return c.opts.Channel.writeSealed(c.ctx, c.ws, f)
	}
	return WriteFrame(c.ctx, c.ws, f)
}

func (c *Conn) readLoop() {
	for {
		data, sealed, err := readMessage(c.ctx, c.ws, c.opts.Channel)
		if err == nil && c.opts.Channel != nil && !sealed {
			err = fmt.Errorf("%w: an unsealed frame on a sealed channel", ErrChannel)
		}
		if errors.Is(err, ErrChannel) {
			c.refuseFrame(err)
			return
		}
		if err == nil && sealed {
			if why, ok := closeRecordReason(data); ok {
				c.peerReason.Store(&why)
				continue // the close frame follows
			}
		}
		if err != nil {
			if why := c.localReason.Load(); why != nil {
				err = *why
			} else if c.opts.Channel != nil {
				err = c.opts.Channel.closedBy(err, c.peerReason.Load())
			} else {
				err = closeReason(err)
			}
			c.shutdown(err, true)
			return
		}
		if c.deliverTyped(data) {
			continue
		}
		f, err := c.codec.DecodeFrame(data)
		if err != nil {
			c.refuseFrame(err)
			return
		}
		switch f.Type {
		case TypeRes:
			c.mu.Lock()
			pc := c.pending[f.ID]
			delete(c.pending, f.ID)
			c.mu.Unlock()
			if pc != nil {
				pc.ch <- response{f: f}
			}
		case TypeEvent:
			if c.opts.OnEvent != nil {
				c.opts.OnEvent(f.Event, f.Payload)
			}
		case TypeReq:
			select {
			case c.inflight <- struct{}{}:
				if c.opts.Inline != nil && c.opts.Inline(f.Method) {
					c.serve(f)
					continue
				}
				go c.serve(f)
			default:
				go c.reply(NewFailure(f.ID, Errorf(CodeBusy, "too many requests in flight on this connection (limit %d); retry later", maxInflight)))
			}
		}
	}
}

// refuseFrame hangs up on a peer that sent a bad frame (or one that fails
// the channel's authentication): it is broken or hostile, so say why and
// hang up rather than guess.
func (c *Conn) refuseFrame(err error) {
	c.shutdown(fmt.Errorf("%w: peer sent a bad frame: %w", ErrClosed, err), false)
	go func() {
		reason := truncate(err.Error(), maxCloseReason)
		if c.opts.Channel != nil {
			// Our sending direction still works: the honest peer learns
			// why, authenticated; a relay reads nothing.
			_ = c.opts.Channel.writeClose(c.ctx, c.ws, reason)
			reason = ""
		}
		_ = c.ws.Close(websocket.StatusPolicyViolation, reason)
		c.cancel()
		c.ws.CloseNow()
	}()
}

// pendingCall is a Call waiting for its response.
type pendingCall struct {
	ch chan response
	// out is the type Call's result decodes into (nil: none, or not a
	// pointer), for deliverTyped.
	out reflect.Type
}

// response is a res frame for a Call. value, when valid, is a fresh *T
// already holding the decoded payload (f.Payload is then empty).
type response struct {
	f     Frame
	value reflect.Value
}

// deliverTyped hands a response for a pending Call to it decoded in one
// pass (Codec.decodeResponse), payload straight into a fresh value of the
// Call's result type. It reports false, leaving the frame to the codec's
// DecodeFrame, for anything it does not handle: another shape, no such
// Call, a payload that does not fit.
func (c *Conn) deliverTyped(data []byte) bool {
	id, ok := c.codec.responseID(data)
	if !ok {
		return false
	}
	c.mu.Lock()
	pc := c.pending[id]
	c.mu.Unlock()
	if pc == nil || pc.out == nil {
		return false
	}
	r, ok := c.codec.decodeResponse(data, id, pc.out)
	if !ok {
		return false
	}
	c.mu.Lock()
	pc = c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if pc != nil {
		pc.ch <- r
	}
	return true
}

func (c *Conn) serve(f Frame) {
	defer func() { <-c.inflight }()
	if c.opts.OnRequest == nil {
		c.reply(NewFailure(f.ID, Errorf(CodeNotFound, "unknown method %q", f.Method)))
		return
	}
	payload, err := c.opts.OnRequest(c.ctx, f.Method, f.Params)
	if err != nil {
		c.reply(NewFailure(f.ID, err))
		return
	}
	res, err := NewResult(f.ID, payload)
	if err != nil {
		c.reply(NewFailure(f.ID, err))
		return
	}
	c.reply(res)
}

func (c *Conn) reply(f Frame) { _ = c.write(c.ctx, f) }

func (c *Conn) pingLoop() {
	ticks, timeout := c.opts.pingTicks, c.opts.pingTimeout
	if ticks == nil {
		t := time.NewTicker(PingInterval)
		defer t.Stop()
		ticks = t.C
	}
	if timeout <= 0 {
		timeout = PingTimeout
	}
	for {
		select {
		case <-c.done:
			return
		case <-ticks:
			ctx, cancel := context.WithTimeout(c.ctx, timeout)
			err := c.ws.Ping(ctx)
			cancel()
			if err != nil && c.ctx.Err() == nil {
				c.shutdown(fmt.Errorf("%w: peer did not answer a keepalive ping within %s", ErrClosed, timeout), true)
				return
			}
		}
	}
}

// closeReason turns a read error into the error pending calls fail with.
func closeReason(err error) error {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		if ce.Reason != "" {
			return fmt.Errorf("%w by peer: %s", ErrClosed, ce.Reason)
		}
		return fmt.Errorf("%w by peer (status %d)", ErrClosed, ce.Code)
	}
	return fmt.Errorf("%w: %v", ErrClosed, err)
}

// WriteFrame writes one frame, bounded by ctx (the handshake's deadline, or
// a Conn's own context, see Conn.write). The frame must come from
// NewRequest, NewResult, NewEvent, NewFailure or DecodeFrame, whose Params
// and Payload are valid JSON (see Frame.appendJSON).
func WriteFrame(ctx context.Context, ws *websocket.Conn, f Frame) error {
	bp := frameBufs.get()
	defer frameBufs.put(bp)
	data, err := f.appendJSON((*bp)[:0])
	if err != nil {
		return fmt.Errorf("encode frame: %w", err)
	}
	*bp = data // keep what appendJSON grew for the next frame
	// The library has written or copied data when Write returns, so the
	// buffer is free to go back to the pool.
	if err := ws.Write(ctx, websocket.MessageText, data); err != nil {
		return fmt.Errorf("%w: write: %v", ErrClosed, err)
	}
	return nil
}

// readMessage reads one message whole, like the library's Read, but into a
// pooled scratch buffer and then one allocation of exactly its size: Read's
// io.ReadAll grows from 512 bytes by doubling, which for a 100 KB result
// allocates and copies the frame about twice over, on every hop. The
// returned bytes are the caller's (decoded frames keep slices of them).
// The read limit set on ws applies as it does to Read. With a channel a
// binary message is opened (sealed reports it; ErrChannel when it does not
// open), straight from the scratch buffer into the returned bytes; a text
// message is returned as it is, for the caller to refuse or not.
func readMessage(ctx context.Context, ws *websocket.Conn, ch *Channel) (data []byte, sealed bool, err error) {
	typ, r, err := ws.Reader(ctx)
	if err != nil {
		return nil, false, err
	}
	bp := frameBufs.get()
	defer frameBufs.put(bp)
	buf := (*bp)[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // let append pick the growth
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			*bp = buf
			return nil, false, err
		}
	}
	*bp = buf
	if ch != nil && typ == websocket.MessageBinary {
		data, err = ch.openSealed(buf)
		return data, err == nil, err
	}
	return bytes.Clone(buf), false, nil
}

// frameBufPool holds the scratch buffers frames are encoded into and read
// through. A buffer grown past keepFrameBuf (a rare multi-megabyte frame)
// is dropped rather than kept for every later small one.
type frameBufPool struct{ p sync.Pool }

// keepFrameBuf is the largest scratch buffer the pool keeps: room for a
// full 200,000-byte result with its JSON escaping.
const keepFrameBuf = 1 << 20

var frameBufs = &frameBufPool{p: sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}}

func (fp *frameBufPool) get() *[]byte { return fp.p.Get().(*[]byte) }

func (fp *frameBufPool) put(b *[]byte) {
	if cap(*b) > keepFrameBuf {
		return
	}
	*b = (*b)[:0]
	fp.p.Put(b)
}

// ReadFrame reads and decodes one frame (used for the connect handshake,
// before a Conn's read loop owns the socket).
func ReadFrame(ctx context.Context, ws *websocket.Conn) (Frame, error) {
	return ReadFrameLimit(ctx, ws, MaxFrame)
}

// ReadFrameLimit is ReadFrame for a frame of at most limit bytes: a larger
// one fails the read and closes the socket (StatusMessageTooBig) before
// it is buffered. The gateway reads connect requests with a small limit.
func ReadFrameLimit(ctx context.Context, ws *websocket.Conn, limit int64) (Frame, error) {
	ws.SetReadLimit(limit)
	data, _, err := readMessage(ctx, ws, nil)
	if err != nil {
		return Frame{}, closeReason(err)
	}
	return DecodeFrame(data)
}
