package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// The channel protocol of exec and attach over WebSocket: every binary
// message starts with its channel's byte.
const (
	// ProtocolV5 adds closing one channel (stdin) with a message on
	// channel 255; servers from Kubernetes 1.30 speak it.
	ProtocolV5 = "v5.channel.k8s.io"
	// ProtocolV4 has no close of stdin: it ends with the connection.
	ProtocolV4 = "v4.channel.k8s.io"

	chanStdin  = 0
	chanStdout = 1
	chanStderr = 2
	chanError  = 3
	chanClose  = 255
)

// StreamOptions are where a stream's output goes.
type StreamOptions struct {
	Stdout, Stderr io.Writer
	// Ping is how often to ping the server (default 30 s), so that a
	// connection that died without a close is noticed.
	Ping time.Duration
}

// Stream is one exec or attach stream. Write sends to the remote stdin;
// output goes to the writers of StreamOptions until the stream ends.
type Stream struct {
	conn  *websocket.Conn
	proto string
	opts  StreamOptions

	wmu    sync.Mutex
	closed bool

	done chan struct{}
	err  error
}

// Stream opens the exec or attach subresource at path (q names the
// container and the streams) over WebSocket and starts reading it.
func (c *Client) Stream(ctx context.Context, path string, q url.Values, opts StreamOptions) (*Stream, error) {
	h := http.Header{}
	if err := c.auth.authorize(ctx, h); err != nil {
		return nil, err
	}
	conn, resp, err := websocket.Dial(ctx, c.url(path, q), &websocket.DialOptions{
		HTTPClient:   c.hc,
		HTTPHeader:   h,
		Subprotocols: []string{ProtocolV5, ProtocolV4},
	})
	if err != nil {
		if resp != nil && resp.StatusCode >= 300 {
			if resp.StatusCode == http.StatusUnauthorized {
				c.auth.refused()
			}
			if resp.Body == nil {
				resp.Body = http.NoBody
			}
			return nil, readStatus(resp)
		}
		return nil, err
	}
	proto := conn.Subprotocol()
	if proto != ProtocolV5 && proto != ProtocolV4 {
		conn.CloseNow()
		return nil, fmt.Errorf("%s: the server speaks %q, not %s or %s", path, proto, ProtocolV5, ProtocolV4)
	}
	// Output comes in messages of the kubelet's buffer size; the default
	// limit of 32 kB would end the stream at the first larger one.
	conn.SetReadLimit(16 << 20)
	if opts.Ping <= 0 {
		opts.Ping = 30 * time.Second
	}
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	s := &Stream{conn: conn, proto: proto, opts: opts, done: make(chan struct{})}
	go s.read()
	go s.ping()
	return s, nil
}

// Protocol is the subprotocol the server chose.
func (s *Stream) Protocol() string { return s.proto }

// read copies output until the stream ends, and records how it ended.
func (s *Stream) read() {
	var err error
	defer func() {
		s.err = err
		close(s.done)
		s.conn.CloseNow()
	}()
	ctx := context.Background()
	for {
		typ, msg, rerr := s.conn.Read(ctx)
		if rerr != nil {
			if st := websocket.CloseStatus(rerr); st == websocket.StatusNormalClosure || st == websocket.StatusGoingAway {
				return
			}
			if err == nil {
				err = rerr
			}
			return
		}
		if typ != websocket.MessageBinary || len(msg) < 1 {
			continue
		}
		data := msg[1:]
		switch msg[0] {
		case chanStdout:
			if _, werr := s.opts.Stdout.Write(data); werr != nil {
				err = werr
				return
			}
		case chanStderr:
			if _, werr := s.opts.Stderr.Write(data); werr != nil {
				err = werr
				return
			}
		case chanError:
			if len(data) == 0 {
				continue
			}
			var st Status
			if json.Unmarshal(data, &st) != nil {
				err = fmt.Errorf("stream error: %s", strings.TrimSpace(string(data)))
				continue
			}
			if st.Status != "Success" {
				err = &StatusError{st}
			}
		}
	}
}

func (s *Stream) ping() {
	t := time.NewTicker(s.opts.Ping)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.Ping)
		err := s.conn.Ping(ctx)
		cancel()
		if err != nil {
			s.conn.CloseNow()
			return
		}
	}
}

// Write sends p to the remote stdin.
func (s *Stream) Write(p []byte) (int, error) {
	msg := make([]byte, 1+len(p))
	msg[0] = chanStdin
	copy(msg[1:], p)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return 0, io.ErrClosedPipe
	}
	if err := s.conn.Write(context.Background(), websocket.MessageBinary, msg); err != nil {
		return 0, err
	}
	return len(p), nil
}

// CloseStdin ends the remote stdin: a close message on v5; on v4, which
// has none, the connection is closed.
func (s *Stream) CloseStdin() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.proto == ProtocolV5 {
		return s.conn.Write(context.Background(), websocket.MessageBinary, []byte{chanClose, chanStdin})
	}
	return s.conn.Close(websocket.StatusNormalClosure, "")
}

// Done is closed when the stream has ended.
func (s *Stream) Done() <-chan struct{} { return s.done }

// Err is how the stream ended (after Done): nil for a normal end, a
// *StatusError for a failure the server reported.
func (s *Stream) Err() error {
	<-s.done
	return s.err
}

// Close cuts the stream at once.
func (s *Stream) Close() error {
	s.wmu.Lock()
	s.closed = true
	s.wmu.Unlock()
	_ = s.conn.CloseNow()
	<-s.done
	return nil
}
