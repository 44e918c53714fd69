package bridge

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/coder/websocket"
)

// Dial connects to a gateway, performs the connect handshake with p and
// returns the established connection. A refused handshake returns the
// gateway's *Error (CodeUnauthorized for bad credentials).
func Dial(ctx context.Context, url string, p ConnectParams, dopts *websocket.DialOptions, opts Options) (*Conn, ConnectResult, error) {
	var res ConnectResult
	ws, _, err := websocket.Dial(ctx, url, dopts)
	if err != nil {
		return nil, res, fmt.Errorf("dial %s: %w (hint: is `exechost gateway` running there? --gateway sets the URL)", url, err)
	}
	f, err := NewRequest("connect", MethodConnect, p)
	if err != nil {
		ws.CloseNow()
		return nil, res, err
	}
	if err := WriteFrame(ctx, ws, f); err != nil {
		ws.CloseNow()
		return nil, res, fmt.Errorf("connect to %s: %w", url, err)
	}
	r, err := ReadFrame(ctx, ws)
	if err != nil {
		ws.CloseNow()
		return nil, res, fmt.Errorf("connect to %s: %w", url, err)
	}
	if r.Type != TypeRes {
		ws.CloseNow()
		return nil, res, fmt.Errorf("connect to %s: %w: expected a response, got %s", url, ErrBadFrame, r.Type)
	}
	if !*r.OK {
		ws.CloseNow()
		return nil, res, r.Error
	}
	if err := json.Unmarshal(r.Payload, &res); err != nil {
		ws.CloseNow()
		return nil, res, fmt.Errorf("connect to %s: bad result: %w", url, err)
	}
	return NewConn(ws, opts), res, nil
}
