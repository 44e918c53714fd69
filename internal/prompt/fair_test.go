package prompt

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/testproc"
)

// heldPrompter holds every prompt until released, counting those inside.
type heldPrompter struct {
	mu      sync.Mutex
	inside  map[string]int
	most    map[string]int
	entered chan string
	release chan struct{}
}

func (h *heldPrompter) Prompt(ctx context.Context, req Request) (policy.Approval, string, error) {
	h.mu.Lock()
	h.inside[req.AgentID]++
	h.most[req.AgentID] = max(h.most[req.AgentID], h.inside[req.AgentID])
	h.mu.Unlock()
	h.entered <- req.AgentID
	defer func() {
		h.mu.Lock()
		h.inside[req.AgentID]--
		h.mu.Unlock()
	}()
	select {
	case <-h.release:
		return policy.AllowOnce, "test", nil
	case <-ctx.Done():
		return "", "", ctx.Err()
	}
}

// TestFairPromptsPerAgent is issue 32's prompt-admission door: one
// agent's flood of prompts takes at most DefaultFairPerAgent of the
// process's slots; another agent's prompt still reaches the approver at
// once, and the flood's prompts wait their turn instead of failing.
func TestFairPromptsPerAgent(t *testing.T) {
	h := &heldPrompter{inside: map[string]int{}, most: map[string]int{}, entered: make(chan string, 64), release: make(chan struct{})}
	f := NewFair(h)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const flood = 3 * DefaultFairTotal
	errs := make(chan error, flood+1)
	for range flood {
		go func() {
			_, _, err := f.Prompt(ctx, Request{AgentID: "flood"})
			errs <- err
		}()
	}
	for range DefaultFairPerAgent {
		if a := testproc.Recv(t, h.entered, "a flood prompt"); a != "flood" {
			t.Fatalf("entered %q", a)
		}
	}
	go func() {
		_, _, err := f.Prompt(ctx, Request{AgentID: "other"})
		errs <- err
	}()
	select {
	case a := <-h.entered:
		if a != "other" {
			t.Fatalf("a flood prompt beyond its share reached the approver before the other agent's (%q)", a)
		}
	case <-ctx.Done():
		t.Fatal("the other agent's prompt never reached the approver")
	}
	// Answer everything: every flood prompt gets its turn.
	go func() {
		for range flood + 1 {
			h.release <- struct{}{}
		}
	}()
	go func() {
		for range h.entered {
		}
	}()
	for range flood + 1 {
		if err := testproc.Recv(t, errs, "a prompt's answer"); err != nil {
			t.Fatalf("a prompt failed instead of waiting its turn: %v", err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.most["flood"] > DefaultFairPerAgent {
		t.Errorf("the flooding agent had %d prompts at the approver at once, want at most %d", h.most["flood"], DefaultFairPerAgent)
	}
}

// TestFairWaiterGivesUp: a prompt whose context ends while it waits fails
// as unreachable (the engine applies askFallback) and holds no slot.
func TestFairWaiterGivesUp(t *testing.T) {
	h := &heldPrompter{inside: map[string]int{}, most: map[string]int{}, entered: make(chan string, 64), release: make(chan struct{})}
	f := &Fair{Next: h, PerAgent: 1, Total: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, _, err := f.Prompt(ctx, Request{AgentID: "a"}); done <- err }()
	testproc.Recv(t, h.entered, "a prompt reaching the approver")
	wctx, wcancel := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() { _, _, err := f.Prompt(wctx, Request{AgentID: "b"}); waited <- err }()
	wcancel()
	if err := testproc.Recv(t, waited, "the waiter giving up"); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("a waiter whose context ended: %v, want ErrUnreachable", err)
	}
	h.release <- struct{}{}
	if err := testproc.Recv(t, done, "Prompt"); err != nil {
		t.Fatal(err)
	}
	// The slot is free again.
	go func() { _, _, err := f.Prompt(ctx, Request{AgentID: "c"}); done <- err }()
	testproc.Recv(t, h.entered, "a prompt reaching the approver")
	h.release <- struct{}{}
	if err := testproc.Recv(t, done, "Prompt"); err != nil {
		t.Fatal(err)
	}
}
