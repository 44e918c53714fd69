package bridge

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/exechost/exechost/internal/hint"
)

// ErrSlowPeer is wrapped (beside ErrClosed) by the error a SendQueue
// returns when it drops a peer for not keeping up.
var ErrSlowPeer = errors.New("peer is not reading")

// DefaultSendQueue is how many events a SendQueue holds for a peer that
// is not keeping up before that peer is disconnected. A prompt announcement
// or resolution is well under a few KB, so a full queue is at most about a
// megabyte per peer.
const DefaultSendQueue = 256

// SendQueue is one peer's bounded queue of outgoing events, written by its
// own goroutine, so that a sender that fans one event out to many peers
// never waits on the slowest of them: Enqueue never blocks. A peer whose
// queue fills (it stopped reading, or reads slower than events arrive) is
// disconnected with a reason rather than skipped, because a skipped event
// would leave its view of the state silently wrong; on reconnecting it is
// sent the state afresh.
//
// Events leave in the order they were enqueued. The queue's goroutine ends
// when the connection closes.
type SendQueue struct {
	c  *Conn
	ch chan queuedEvent
}

type queuedEvent struct {
	event   string
	payload json.RawMessage
}

// NewSendQueue starts a queue of n events (DefaultSendQueue when n <= 0)
// for c.
func NewSendQueue(c *Conn, n int) *SendQueue {
	if n <= 0 {
		n = DefaultSendQueue
	}
	q := &SendQueue{c: c, ch: make(chan queuedEvent, n)}
	go q.run()
	return q
}

// Enqueue queues one event without blocking. The payload is encoded now,
// so the caller may change it afterwards. It returns an error when the
// connection is closed, the payload cannot be encoded, or the queue was
// full (and the connection has been dropped for it: ErrSlowPeer).
func (q *SendQueue) Enqueue(event string, payload any) error {
	if err := q.c.Err(); err != nil {
		return err
	}
	raw, err := Marshal(payload)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", event, err)
	}
	select {
	case q.ch <- queuedEvent{event: event, payload: raw}:
		return nil
	default:
		err := hint.Wrap(fmt.Errorf("%w: %w: it fell %d events behind", ErrClosed, ErrSlowPeer, cap(q.ch)), "it is sent the current state when it reconnects")
		q.c.shutdown(err, true)
		return err
	}
}

func (q *SendQueue) run() {
	for {
		select {
		case <-q.c.done:
			return
		case ev := <-q.ch:
			// A write to a peer that stopped reading ends when the
			// keepalive drops the connection (see PingInterval), which
			// ends this loop.
			_ = q.c.Notify(q.c.ctx, ev.event, ev.payload)
		}
	}
}
