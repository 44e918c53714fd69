package approver

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/approverui"
	"github.com/exechost/exechost/internal/asksock"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/testproc"
)

// uiFunc is a UI written inline.
type uiFunc func(ctx context.Context, env approverui.Env) error

func (f uiFunc) Serve(ctx context.Context, env approverui.Env) error { return f(ctx, env) }

// lockedBuffer collects what Run writes from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	sb strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb.String()
}

// TestRunServesTheSocketToItsUI: a prompt sent to the socket of a running
// approver reaches the UI's queue, the UI's answer goes back to the
// client, and the approver stops when its UI returns. A second approver
// on the same state directory refuses to start.
func TestRunServesTheSocketToItsUI(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	second := make(chan error, 1)
	quit := make(chan struct{}) // closed once the client has its answer
	ui := uiFunc(func(ctx context.Context, env approverui.Env) error {
		// The socket is live by now: a second approver must not steal it.
		second <- Run(ctx, Options{StateDir: dir, UI: uiFunc(func(context.Context, approverui.Env) error { return nil })})
		list, ch, stop := env.Queue.Watch()
		defer stop()
		for len(list) == 0 {
			select {
			case c := <-ch:
				if c.Kind == prompt.ChangeAdded {
					list = append(list, c.Pending)
				}
			case <-ctx.Done(): // the test ended
				return ctx.Err()
			}
		}
		if err := env.Queue.Resolve(list[0].ID, policy.AllowOnce, "test ui"); err != nil {
			return err
		}
		// Returning at once would stop the server while it still writes
		// the decision back; a human quits the UI later.
		select {
		case <-quit:
		case <-ctx.Done():
		}
		return nil
	})
	stderr := &lockedBuffer{}
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{StateDir: dir, UI: ui, Err: stderr}) }()

	if err := testproc.Recv(t, second, "the second approver"); !errors.Is(err, asksock.ErrAlreadyRunning) {
		t.Fatalf("second approver on one socket: %v, want ErrAlreadyRunning", err)
	}
	store := approvals.NewStore(dir)
	f, err := store.Load()
	if err != nil {
		t.Fatal(err)
	}
	c := &asksock.Client{SocketPath: store.SocketPath(f), Token: []byte(f.Socket.Token)}
	a, by, err := c.Prompt(ctx, prompt.Request{Command: "ls", Argv: []string{"ls"}, Host: "gateway"})
	if err != nil || a != policy.AllowOnce || by != "test ui" {
		t.Fatalf("Prompt = %q by %q, %v; want allow-once by test ui", a, by, err)
	}
	close(quit)
	if err := testproc.Recv(t, done, "Run after its UI returned"); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if !strings.Contains(stderr.String(), "approver: listening on "+store.SocketPath(f)) {
		t.Errorf("stderr lacks the listening line:\n%s", stderr.String())
	}
}

// TestRunNeedsAUI: Run without a UI is an error, not an approver nobody
// can answer.
func TestRunNeedsAUI(t *testing.T) {
	if err := Run(t.Context(), Options{StateDir: t.TempDir()}); err == nil {
		t.Fatal("Run without a UI succeeded")
	}
}
