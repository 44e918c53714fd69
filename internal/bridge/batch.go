package bridge

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// maxBatchKeep bounds the buffer a frameBatcher keeps between frames;
// a larger one (a big result) is let go after its frame is written.
const maxBatchKeep = 256 << 10

// frameBatcher sits under a client's WebSocket and hands the socket each
// frame in one write. The WebSocket library masks a client's frames
// through a 4 KiB buffer, writing each 4 KiB to the socket as it fills:
// 25 system calls, and as many wake-ups of the reading peer, for a
// 100 KB result. frameBatcher reads the frame headers of the byte stream
// it is given (RFC 6455 §5.2: the payload length and whether a masking key
// follows) and holds the bytes until the frames they hold are complete,
// then writes them at once. Control frames (ping, pong, close) are
// frames like any other, so nothing waits behind an unfinished one for
// longer than the library takes to write it.
type frameBatcher struct {
	net.Conn
	// framing turns on with the first bytes read: before them the client
	// writes its HTTP upgrade request, after them only frames. (Atomic: a
	// read must never wait for a write stuck on a full socket.)
	framing atomic.Bool
	mu      sync.Mutex // guards the rest; held across a socket write
	buf     []byte
	// done is how many bytes at the start of buf are complete frames.
	done int
	// off: a frame header this side never writes was seen (a length past
	// maxBatchFrame); from then on bytes pass straight through.
	off bool
}

// maxBatchFrame is the longest frame held back: far past MaxFrame, which
// is the most this side ever sends in one frame.
const maxBatchFrame = 64 << 20

// Write buffers p and writes everything buffered once it ends on a frame
// boundary. An error of that write is the error of the Write that
// completed the frame.
func (b *frameBatcher) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.framing.Load() || b.off || len(b.buf) == 0 && frameLen(p) == len(p) {
		return b.Conn.Write(p) // one whole frame: nothing to hold
	}
	b.buf = append(b.buf, p...)
	for !b.off {
		n := frameLen(b.buf[b.done:])
		if n < 0 {
			b.off = true
			break
		}
		if n == 0 || b.done+n > len(b.buf) {
			break
		}
		b.done += n
	}
	if !b.off && b.done < len(b.buf) {
		return len(p), nil // a frame is still coming
	}
	_, err := b.Conn.Write(b.buf)
	b.done = 0
	if cap(b.buf) > maxBatchKeep {
		b.buf = nil
	} else {
		b.buf = b.buf[:0]
	}
	return len(p), err
}

// Read reads from the connection; the first bytes read (the gateway's
// answer to the upgrade request) turn framing on.
func (b *frameBatcher) Read(p []byte) (int, error) {
	n, err := b.Conn.Read(p)
	if n > 0 && !b.framing.Load() {
		b.framing.Store(true)
	}
	return n, err
}

// frameLen returns the length of the frame b starts with (header, masking
// key and payload), 0 while its header is incomplete, or -1 for a length
// past maxBatchFrame.
func frameLen(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	n, hdr := int(b[1]&0x7f), 2
	switch n {
	case 126:
		if len(b) < 4 {
			return 0
		}
		n, hdr = int(binary.BigEndian.Uint16(b[2:])), 4
	case 127:
		if len(b) < 10 {
			return 0
		}
		l := binary.BigEndian.Uint64(b[2:])
		if l > maxBatchFrame {
			return -1
		}
		n, hdr = int(l), 10
	}
	if b[1]&0x80 != 0 {
		hdr += 4 // masking key
	}
	return hdr + n
}

// BatchingClient returns an HTTP client for websocket.DialOptions whose
// connections write each WebSocket frame to the socket in one piece (see
// frameBatcher): base's dialing, proxy and TLS settings, with TLS done
// below the batcher. base may be nil (http.DefaultTransport's settings).
func BatchingClient(base *http.Transport) *http.Client {
	if base == nil {
		base = http.DefaultTransport.(*http.Transport)
	}
	tr := base.Clone()
	// The connection becomes the WebSocket or is closed: never reused
	// for another request, whose bytes would be read as frames.
	tr.DisableKeepAlives = true
	dialer := &net.Dialer{}
	plain := tr.DialContext
	if plain == nil {
		plain = dialer.DialContext
	}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := plain(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &frameBatcher{Conn: c}, nil
	}
	cfg := tr.TLSClientConfig
	tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := plain(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		conf := &tls.Config{}
		if cfg != nil {
			conf = cfg.Clone()
		}
		if conf.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				host = addr
			}
			conf.ServerName = host
		}
		tc := tls.Client(c, conf)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, err
		}
		return &frameBatcher{Conn: tc}, nil
	}
	return &http.Client{Transport: tr}
}
