package prompt

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/testproc"
)

type result struct {
	a   policy.Approval
	by  string
	err error
}

// submit queues p in the background and waits until it is listed.
func submit(t *testing.T, b *Broker, ctx context.Context, p Pending) <-chan result {
	t.Helper()
	ch, stop := b.Subscribe()
	defer stop()
	out := make(chan result, 1)
	go func() {
		a, by, err := b.Submit(ctx, p)
		out <- result{a, by, err}
	}()
	for c := range ch {
		if c.Kind == ChangeAdded && c.Pending.ID == p.ID {
			break
		}
	}
	return out
}

func TestBrokerResolve(t *testing.T) {
	noAlways := Request{Command: "x", Choices: []string{"allow-once", "deny"}}
	tests := []struct {
		name    string
		queued  []Pending
		id      string
		a       policy.Approval
		wantErr error
		want    string // id that gets the answer
	}{
		{"exact", []Pending{{ID: "abc123"}, {ID: "abd456"}}, "abc123", policy.AllowOnce, nil, "abc123"},
		{"unique prefix", []Pending{{ID: "abc123"}, {ID: "abd456"}}, "abc", policy.Reject, nil, "abc123"},
		{"ambiguous prefix", []Pending{{ID: "abc123"}, {ID: "abd456"}}, "ab", policy.AllowOnce, ErrAmbiguousID, ""},
		{"unknown", []Pending{{ID: "abc123"}}, "zz", policy.AllowOnce, ErrUnknownID, ""},
		{"empty id", []Pending{{ID: "abc123"}}, " ", policy.AllowOnce, ErrUnknownID, ""},
		{"invalid decision", []Pending{{ID: "abc123"}}, "abc123", "allow-forever", policy.ErrInvalidValue, ""},
		{"allow-always not offered", []Pending{{ID: "abc123", Request: noAlways}}, "abc", policy.AllowAlways, ErrNotOffered, ""},
		{"deny always offered", []Pending{{ID: "abc123", Request: noAlways}}, "abc", policy.Reject, nil, "abc123"},
		{"past ExpiresAt", []Pending{{ID: "abc123", ExpiresAt: time.Now().Add(-time.Second)}, {ID: "x"}}, "abc", policy.AllowOnce, ErrExpired, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBroker()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			waits := map[string]<-chan result{}
			for _, p := range tt.queued {
				waits[p.ID] = submit(t, b, ctx, p)
			}
			err := b.Resolve(tt.id, tt.a, "tester")
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Resolve = %v, want %v", err, tt.wantErr)
			}
			if tt.want == "" {
				live := 0
				for _, p := range tt.queued {
					if p.ExpiresAt.IsZero() || p.ExpiresAt.After(time.Now()) {
						live++
					}
				}
				if n := len(b.List()); n != live {
					t.Errorf("List has %d prompts after a failed Resolve, want %d (expired ones hidden)", n, live)
				}
				return
			}
			r := testproc.Recv(t, waits[tt.want], "Submit of "+tt.want)
			if r.err != nil || r.a != tt.a || r.by != "tester" {
				t.Errorf("Submit = %q by %q, %v; want %q by tester", r.a, r.by, r.err, tt.a)
			}
		})
	}
}

func TestBrokerLateAnswers(t *testing.T) {
	b := NewBroker()
	w := submit(t, b, t.Context(), Pending{ID: "answered-1"})
	if err := b.Resolve("answered-1", policy.AllowOnce, "x"); err != nil {
		t.Fatal(err)
	}
	testproc.Recv(t, w, "Submit after the answer")
	if err := b.Resolve("answered", policy.AllowOnce, "x"); !errors.Is(err, ErrAnswered) {
		t.Errorf("second answer: %v, want ErrAnswered (allow-once is single-use)", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	w = submit(t, b, ctx, Pending{ID: "expired-1"})
	cancel()
	if r := testproc.Recv(t, w, "Submit after expiry"); !errors.Is(r.err, ErrExpired) || r.a != "" {
		t.Fatalf("Submit after cancel = %+v, want ErrExpired", r)
	}
	if err := b.Resolve("expired-1", policy.AllowOnce, "x"); !errors.Is(err, ErrExpired) {
		t.Errorf("answer after expiry: %v, want ErrExpired", err)
	}
	if _, _, err := b.Submit(t.Context(), Pending{ID: "expired-1"}); !errors.Is(err, ErrDuplicateID) {
		t.Errorf("reusing an id: %v, want ErrDuplicateID", err)
	}
}

func TestBrokerListOrderAndIndependence(t *testing.T) {
	b := NewBroker()
	t0 := time.Now()
	var waits []<-chan result
	for i := range 5 {
		p := Pending{ID: fmt.Sprintf("p%d", 4-i), ReceivedAt: t0.Add(time.Duration(i) * time.Second)}
		waits = append(waits, submit(t, b, t.Context(), p))
	}
	var ids []string
	for _, p := range b.List() {
		ids = append(ids, p.ID)
	}
	if diff := cmp.Diff([]string{"p4", "p3", "p2", "p1", "p0"}, ids); diff != "" {
		t.Errorf("List order (-want +got):\n%s", diff)
	}
	// Answering the newest first does not wait for the oldest.
	if err := b.Resolve("p0", policy.Reject, "x"); err != nil {
		t.Fatal(err)
	}
	if r := testproc.Recv(t, waits[4], "Submit of the prompt answered first"); r.a != policy.Reject {
		t.Errorf("p0 got %+v", r)
	}
	if n := len(b.List()); n != 4 {
		t.Errorf("%d pending, want 4", n)
	}
}

// TestBrokerSlowSubscriber: a subscriber that never reads does not block
// the queue.
func TestBrokerSlowSubscriber(t *testing.T) {
	b := NewBroker()
	_, stop := b.Subscribe() // never read
	defer stop()
	for i := range 3 * subBuffer {
		id := fmt.Sprint("id", i)
		done := make(chan struct{})
		go func() {
			defer close(done)
			b.Submit(t.Context(), Pending{ID: id})
		}()
		for b.Resolve(id, policy.AllowOnce, "x") != nil {
			time.Sleep(time.Millisecond) // not yet queued
		}
		testproc.Recv(t, done, "Submit after Resolve")
	}
}

// TestBrokerWatch checks that Watch hands each prompt over exactly once:
// one queued before the call is in its list and never announced on its
// channel, one queued after is announced and not listed. (Subscribe then
// List gave a prompt queued in between twice, and the line mode printed it
// twice.)
func TestBrokerWatch(t *testing.T) {
	b := NewBroker()
	ctx := t.Context()
	before := submit(t, b, ctx, Pending{ID: "before", Request: sampleRequest})
	list, ch, stop := b.Watch()
	defer stop()
	if len(list) != 1 || list[0].ID != "before" {
		t.Fatalf("Watch listed %+v; want the prompt queued before it", list)
	}
	after := submit(t, b, ctx, Pending{ID: "after", Request: sampleRequest})
	for _, id := range []string{"before", "after"} {
		if err := b.Resolve(id, policy.AllowOnce, "test"); err != nil {
			t.Fatal(err)
		}
	}
	testproc.Recv(t, before, "Submit of before")
	testproc.Recv(t, after, "Submit of after")
	var got []string
	for len(got) < 3 {
		c := testproc.Recv(t, ch, "queue change")
		got = append(got, fmt.Sprint(c.Kind, " ", c.Pending.ID))
	}
	want := []string{
		fmt.Sprint(ChangeAdded, " after"),
		fmt.Sprint(ChangeResolved, " before"),
		fmt.Sprint(ChangeResolved, " after"),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changes after Watch (-want +got):\n%s", diff)
	}
}

// TestBrokerWatchConcurrent calls Watch while prompts are being queued and
// checks that every prompt queued is either listed or announced as added,
// never both and never neither.
func TestBrokerWatchConcurrent(t *testing.T) {
	const n = 200
	for round := range 20 {
		b := NewBroker()
		ctx, cancel := context.WithCancel(t.Context())
		started := make(chan struct{})
		go func() {
			for i := range n {
				if i == n/2 {
					close(started)
				}
				go b.Submit(ctx, Pending{ID: fmt.Sprint("p", i), Request: sampleRequest})
			}
		}()
		testproc.Recv(t, started, "submitters started")
		list, ch, stop := b.Watch()
		seen := map[string]int{}
		for _, p := range list {
			seen[p.ID]++
		}
		// Wait until all n are queued, then count the announcements.
		deadline := time.Now().Add(time.Minute)
		for len(b.List()) < n {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: only %d of %d prompts queued after a minute", round, len(b.List()), n)
			}
			time.Sleep(time.Millisecond)
		}
		stop()
		for c := range ch {
			if c.Kind == ChangeAdded {
				seen[c.Pending.ID]++
			}
		}
		cancel()
		if len(seen) != n {
			t.Fatalf("round %d: %d of %d prompts were listed or announced", round, len(seen), n)
		}
		for id, k := range seen {
			if k != 1 {
				t.Fatalf("round %d: prompt %s was handed over %d times", round, id, k)
			}
		}
	}
}

var sampleRequest = Request{
	Command: "ls -la", Argv: []string{"ls", "-la"}, Cwd: "/tmp", Host: "gateway",
	Security: "allowlist", Ask: "on-miss", AgentID: "main", SessionKey: "s1",
	ResolvedPaths: []string{"/usr/bin/ls"}, Allowlisted: []bool{false}, Reason: "allowlist-miss",
}
