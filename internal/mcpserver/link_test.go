package mcpserver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/client"
	"github.com/exechost/exechost/internal/testproc"
)

// TestLinkDialsOutsideTheLock holds a dial open: the link's lock stays
// free meanwhile, a second caller waits for that dial instead of starting
// its own, and both get its failure.
func TestLinkDialsOutsideTheLock(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var dials atomic.Int32
	waiting := make(chan struct{}, 1)
	l := &link{waiting: func() { waiting <- struct{}{} }, url: "ws://127.0.0.1:1", log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		dial: func(ctx context.Context, role string) (*client.Client, error) {
			if dials.Add(1) == 1 {
				close(entered)
			}
			<-release
			return nil, errors.New("connection refused")
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make(chan error, 2)
	go func() { _, err := l.get(ctx); errs <- err }()
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the first caller never dialed")
	}
	// The lock is free while the dial runs: close and forget, which
	// take it, do not wait for the dial.
	locked := make(chan struct{})
	go func() { l.close(); close(locked) }()
	select {
	case <-locked:
	case <-ctx.Done():
		t.Fatal("the link's lock is held across the dial")
	}
	go func() { _, err := l.get(ctx); errs <- err }()
	// The second caller waits for the dial in flight; it never dials.
	select {
	case <-waiting:
	case <-ctx.Done():
		t.Fatal("the second caller did not wait for the dial in flight")
	}
	close(release)
	for range 2 {
		if err := testproc.Recv(t, errs, "the callers' failures"); !errors.Is(err, ErrUnreachable) {
			t.Errorf("get = %v, want the dial's failure", err)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d dials for two concurrent callers, want 1", n)
	}
}

// TestLinkWaiterGivesUp: a caller waiting for another's dial stops at its
// own deadline, and the dial in flight is unaffected.
func TestLinkWaiterGivesUp(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	l := &link{url: "ws://127.0.0.1:1", log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		dial: func(ctx context.Context, role string) (*client.Client, error) {
			close(entered)
			<-release
			return nil, errors.New("connection refused")
		}}
	first := make(chan error, 1)
	go func() { _, err := l.get(context.Background()); first <- err }()
	testproc.Recv(t, entered, "the dialer's start")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.get(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("waiter with an ended context = %v, want canceled", err)
	}
	close(release)
	if err := testproc.Recv(t, first, "the dialer's failure"); !errors.Is(err, ErrUnreachable) {
		t.Errorf("dialer = %v", err)
	}
}
