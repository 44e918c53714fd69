package node

import (
	"context"
	"errors"
	"testing"
)

// TestInvokeCancels: a cancel ends a live invoke with its reason; a cancel
// that overtakes its invoke ends it as soon as it starts; an invoke nobody
// cancelled is untouched.
func TestInvokeCancels(t *testing.T) {
	var c invokeCancels
	ctx, done := c.start(context.Background(), "a")
	c.cancel("a", "caller went away")
	var ec errInvokeCancelled
	if ctx.Err() == nil || !errors.As(context.Cause(ctx), &ec) || ec.reason != "caller went away" {
		t.Fatalf("live invoke: err %v cause %v", ctx.Err(), context.Cause(ctx))
	}
	done()

	c.cancel("b", "early")
	ctx, done = c.start(context.Background(), "b")
	if ctx.Err() == nil {
		t.Fatal("an invoke cancelled before it started still runs")
	}
	done()

	ctx, done = c.start(context.Background(), "c")
	defer done()
	if ctx.Err() != nil {
		t.Fatalf("uncancelled invoke: %v", ctx.Err())
	}
	c.cancel("", "ignored")
}
