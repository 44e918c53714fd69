package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/exechost/exechost/internal/approvalroute"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/testproc"
)

func newTestHub(t *testing.T) *promptHub {
	t.Helper()
	h := newPromptHub(func(string, ...any) {})
	t.Cleanup(h.close)
	return h
}

type submitted struct {
	id  string
	a   policy.Approval
	by  string
	err error
}

// submitAsync queues a prompt and returns its id once it is listed, and
// the channel its outcome arrives on.
func submitAsync(t *testing.T, h *promptHub, ctx context.Context, req prompt.Request) (string, <-chan submitted) {
	t.Helper()
	before := map[string]bool{}
	for _, p := range h.broker.List() {
		before[p.ID] = true
	}
	ch := make(chan submitted, 1)
	go func() {
		id, a, by, err := h.submit(ctx, req, "test")
		ch <- submitted{id, a, by, err}
	}()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		for _, p := range h.broker.List() {
			if !before[p.ID] {
				return p.ID, ch
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("prompt never listed")
	return "", nil
}

func code(err error) string {
	var be *bridge.Error
	if errors.As(err, &be) {
		return be.Code
	}
	return fmt.Sprintf("not a bridge error: %v", err)
}

func TestHubResolve(t *testing.T) {
	h := newTestHub(t)
	ctx := t.Context()
	idA, outA := submitAsync(t, h, ctx, prompt.Request{Command: "a"})
	idB, outB := submitAsync(t, h, ctx, prompt.Request{Command: "b", Choices: []string{"allow-once", "deny"}})
	common := 0
	for common < len(idA) && idA[common] == idB[common] {
		common++
	}

	tests := []struct {
		name, id, decision string
		wantCode           string
		wantMsg            string
	}{
		{"unknown", "ffffffff-no", "allow-once", bridge.CodeNotFound, "unknown approval id"},
		{"empty", "", "allow-once", bridge.CodeNotFound, "empty id"},
		{"bad decision", idA, "sure", bridge.CodeInvalidRequest, "want allow-once"},
		{"not offered", idB, "allow-always", bridge.CodeInvalidRequest, "not offered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.resolve(tt.id, tt.decision, "tester")
			if code(err) != tt.wantCode || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("resolve(%q, %q) = %v; want %s containing %q", tt.id, tt.decision, err, tt.wantCode, tt.wantMsg)
			}
		})
	}

	// A unique prefix resolves, names the full id, and is single use.
	res, err := h.resolve(idA[:common+1], "allow-always", "tester")
	if err != nil || res.ID != idA || res.By != "tester" {
		t.Fatalf("resolve by prefix = %+v, %v", res, err)
	}
	if got := await(t, outA, "prompt A's answer"); got.err != nil || got.a != policy.AllowAlways || got.by != "tester" || got.id != idA {
		t.Fatalf("submit A = %+v", got)
	}
	if _, err := h.resolve(idA, "allow-once", "again"); code(err) != bridge.CodeStale || !errors.Is(err, prompt.ErrAnswered) {
		t.Fatalf("second answer = %v, want already answered", err)
	}
	// Deny is always offered.
	if _, err := h.resolve(idB, " deny ", "tester"); err != nil {
		t.Fatal(err)
	}
	if got := await(t, outB, "prompt B's answer"); got.err != nil || got.a != policy.Reject {
		t.Fatalf("submit B = %+v", got)
	}
	if p := h.pending(); len(p.Approvals) != 0 {
		t.Fatalf("pending = %+v", p)
	}
}

// TestHubAmbiguousPrefix: 17 pending ids share a first hex digit in at
// least one pair (pigeonhole); that digit is an ambiguous prefix, and the
// error names every candidate.
func TestHubAmbiguousPrefix(t *testing.T) {
	h := newTestHub(t)
	byFirst := map[byte][]string{}
	for range 17 {
		id, _ := submitAsync(t, h, t.Context(), prompt.Request{})
		byFirst[id[0]] = append(byFirst[id[0]], id)
	}
	for c, ids := range byFirst {
		if len(ids) < 2 {
			continue
		}
		_, err := h.resolve(string(c), "allow-once", "tester")
		if code(err) != bridge.CodeAmbiguous {
			t.Fatalf("resolve(%q) = %v, want AMBIGUOUS", c, err)
		}
		for _, id := range ids {
			if !strings.Contains(err.Error(), id) {
				t.Errorf("ambiguity error does not name %s: %v", id, err)
			}
		}
		return
	}
	t.Fatal("17 hex-digit ids without a shared first digit")
}

// TestHubExpiry: the prompt's own expiry ends the wait with ErrTimeout; a
// late answer says expired.
func TestHubExpiry(t *testing.T) {
	h := newTestHub(t)
	exp := time.Now().Add(30 * time.Millisecond).UnixMilli()
	_, _, _, err := h.submit(t.Context(), prompt.Request{Command: "x", ExpiresAtMs: exp}, "test")
	if !errors.Is(err, prompt.ErrTimeout) {
		t.Fatalf("submit = %v, want ErrTimeout", err)
	}
	// An expiry in the past expires at once; one beyond MaxPromptWait is
	// capped (the listing shows the capped deadline).
	_, _, _, err = h.submit(t.Context(), prompt.Request{ExpiresAtMs: 1}, "test")
	if !errors.Is(err, prompt.ErrTimeout) {
		t.Fatalf("submit (past expiry) = %v, want ErrTimeout", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	id, out := submitAsync(t, h, ctx, prompt.Request{ExpiresAtMs: time.Now().Add(24 * time.Hour).UnixMilli()})
	p := h.pending().Approvals
	if len(p) != 1 || p[0].ID != id || time.UnixMilli(p[0].ExpiresAtMs).After(time.Now().Add(MaxPromptWait)) {
		t.Fatalf("pending = %+v, want expiry capped at %s", p, MaxPromptWait)
	}
	cancel()
	if got := await(t, out, "the cancelled prompt's end"); got.err == nil || errors.Is(got.err, prompt.ErrTimeout) {
		t.Fatalf("cancelled submit = %+v, want a non-timeout error", got)
	}
	if _, err := h.resolve(id, "allow-once", "late"); code(err) != bridge.CodeStale || !errors.Is(err, prompt.ErrExpired) {
		t.Fatalf("late answer = %v, want expired", err)
	}
}

// TestHubNodeRequests: refs are per node, withdrawal ends the wait, and a
// node's pending prompts are bounded.
func TestHubNodeRequests(t *testing.T) {
	h := newTestHub(t)
	ctx := t.Context()
	type outcome struct {
		ans approvalroute.NodeAnswer
		err error
	}
	start := func(node, ref string) <-chan outcome {
		ch := make(chan outcome, 1)
		go func() {
			a, err := h.nodeRequest(ctx, node, approvalroute.NodeRequest{Ref: ref, Request: prompt.Request{NodeID: "forged", Host: "gateway"}})
			ch <- outcome{a, err}
		}()
		return ch
	}
	waitPending := func(n int) []approvalroute.Requested {
		t.Helper()
		for range 60000 {
			if p := h.pending().Approvals; len(p) == n {
				return p
			}
			time.Sleep(time.Millisecond)
		}
		t.Fatalf("never %d pending", n)
		return nil
	}
	w := start("n1", "r1")
	p := waitPending(1)
	if p[0].NodeID != "n1" || p[0].Host != "node" {
		t.Errorf("a node's claims about itself were kept: %+v", p[0])
	}
	if _, err := h.nodeRequest(ctx, "n1", approvalroute.NodeRequest{Ref: "r1"}); code(err) != bridge.CodeInvalidRequest {
		t.Errorf("duplicate ref = %v", err)
	}
	if _, err := h.nodeRequest(ctx, "n1", approvalroute.NodeRequest{}); code(err) != bridge.CodeInvalidRequest {
		t.Errorf("empty ref = %v", err)
	}
	h.nodeCancel("n2", "r1") // another node's ref: no effect here
	h.nodeCancel("n1", "r1")
	if got := await(t, w, "the withdrawn request's end"); code(got.err) != bridge.CodeStale || !errors.Is(got.err, ErrPromptWithdrawn) {
		t.Fatalf("withdrawn = %+v", got)
	}
	// A cancel that overtakes its request ends the request at once.
	if got := await(t, start("n2", "r1"), "the overtaken request's end"); code(got.err) != bridge.CodeStale || !errors.Is(got.err, ErrPromptWithdrawn) {
		t.Fatalf("request after its cancel = %+v", got)
	}
	if n := len(h.pending().Approvals); n != 0 {
		t.Fatalf("%d pending after withdrawals", n)
	}

	var wg sync.WaitGroup
	outs := make([]<-chan outcome, MaxNodePrompts)
	for i := range MaxNodePrompts {
		outs[i] = start("flood", fmt.Sprint(i))
	}
	waitPending(MaxNodePrompts)
	if _, err := h.nodeRequest(ctx, "flood", approvalroute.NodeRequest{Ref: "one-too-many"}); code(err) != bridge.CodeBusy {
		t.Errorf("prompt beyond the limit = %v, want BUSY", err)
	}
	for _, p := range h.pending().Approvals {
		if _, err := h.resolve(p.ID, "deny", "ops"); err != nil {
			t.Fatal(err)
		}
	}
	for _, ch := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select { // not await: t.Fatalf may not end a test from this goroutine
			case got := <-ch:
				if got.err != nil || got.ans.Decision != "deny" || got.ans.By != "ops" {
					t.Errorf("flood answer = %+v", got)
				}
			case <-time.After(time.Minute):
				t.Errorf("timed out after a minute waiting for a flood prompt's answer")
			}
		}()
	}
	testproc.WaitGroup(t, &wg, "the concurrent prompts")
}

// FuzzResolve feeds operator input (id and decision) to the hub: nothing
// panics, and nothing resolves unless it names the pending prompt with a
// valid decision.
func FuzzResolve(f *testing.F) {
	f.Add("", "allow-once")
	f.Add("abc", "deny")
	f.Add("\x00", "allow-always")
	f.Add(" ", " ")
	f.Add("ffffffff", "ALLOW-ONCE")
	h := newPromptHub(func(string, ...any) {})
	defer h.close()
	f.Fuzz(func(t *testing.T, id, decision string) {
		res, err := h.resolve(id, decision, "fuzz")
		if err == nil {
			t.Fatalf("resolve(%q, %q) = %+v with nothing pending", id, decision, res)
		}
		if code(err) == "" {
			t.Fatalf("resolve error without a code: %v", err)
		}
	})
}

// FuzzNodeRequest feeds node.approval.request params (a paired node's
// bytes) to the hub with a wait that ends at once: nothing panics, an
// error always carries a wire code, and nothing stays pending.
func FuzzNodeRequest(f *testing.F) {
	f.Add([]byte(`{"ref":"r","request":{"command":"ls","choices":["allow-once"]}}`))
	f.Add([]byte(`{"ref":"","request":{}}`))
	f.Add([]byte(`{"ref":"x","request":{"expiresAtMs":-1,"nodeId":"evil","host":"gateway"}}`))
	f.Add([]byte(`null`))
	h := newPromptHub(func(string, ...any) {})
	defer h.close()
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := decode[approvalroute.NodeRequest](approvalroute.MethodNodeRequest, raw)
		if err != nil {
			if code(err) != bridge.CodeInvalidRequest {
				t.Fatalf("decode error without INVALID_REQUEST: %v", err)
			}
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if ans, err := h.nodeRequest(ctx, "fuzz-node", p); err == nil {
			t.Fatalf("answered %+v with nobody answering", ans)
		} else if strings.HasPrefix(code(err), "not a bridge error") {
			t.Fatal(err)
		}
		if n := len(h.pending().Approvals); n != 0 {
			t.Fatalf("%d prompts left pending", n)
		}
	})
}

// await receives from ch, failing the test after a minute instead of
// hanging until go test's timeout when the answer never comes. (The
// external test package's recv cannot be shared with this one.)
func await[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("timed out after a minute waiting for %s", what)
		var zero T
		return zero
	}
}

// serverConn returns the gateway side of a loopback WebSocket. With read
// its client is a bridge.Conn that hands events to onEvent; without, nothing
// ever reads from the client's socket.
func serverConn(t *testing.T, read bool, onEvent bridge.EventHandler) *bridge.Conn {
	t.Helper()
	got := make(chan *bridge.Conn, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		got <- bridge.NewConn(ws, bridge.Options{NoPing: true})
	}))
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if read {
		cli := bridge.NewConn(ws, bridge.Options{NoPing: true, OnEvent: onEvent})
		t.Cleanup(func() { cli.Close("test done") })
	} else {
		t.Cleanup(func() { ws.CloseNow() })
	}
	c := await(t, got, "server side of the connection")
	t.Cleanup(func() { c.Close("test done") })
	return c
}

// TestHubSlowOperator: an operator that stops reading delays no other. The
// reading operator sees every prompt announced and resolved, in order,
// while the other's writes are blocked; the stalled one is disconnected
// once its own queue is full, and the broadcast never waited on it.
func TestHubSlowOperator(t *testing.T) {
	h := newTestHub(t)
	events := make(chan string, 1)
	fast := serverConn(t, true, func(event string, payload json.RawMessage) {
		var p struct{ ID string }
		_ = json.Unmarshal(payload, &p)
		events <- event + " " + p.ID
	})
	slow := serverConn(t, false, nil)
	h.addOperator(fast, "fast")
	h.addOperator(slow, "stalled")
	// A long command fills the stalled socket's buffers in a few events.
	big := strings.Repeat("x", 32<<10)
	for n := 0; ; n++ {
		if n == 5000 {
			t.Fatal("the stalled operator was never disconnected")
		}
		id, out := submitAsync(t, h, t.Context(), prompt.Request{Command: big})
		if _, err := h.resolve(id, "deny", "tester"); err != nil {
			t.Fatal(err)
		}
		await(t, out, "prompt answer")
		// Each event reaches the reading operator before the next prompt
		// is made, so the stalled one falls behind because its writes
		// block, not because a burst outran a healthy writer.
		for _, want := range []string{approvalroute.EventRequested + " " + id, approvalroute.EventResolved + " " + id} {
			if got := await(t, events, want); got != want {
				t.Fatalf("reading operator got %q, want %q", got, want)
			}
		}
		if slow.Err() != nil {
			t.Logf("stalled operator disconnected after %d prompts: %v", n+1, slow.Err())
			if !errors.Is(slow.Err(), bridge.ErrSlowPeer) {
				t.Errorf("disconnect reason = %v, want ErrSlowPeer", slow.Err())
			}
			return
		}
	}
}
