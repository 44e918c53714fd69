package gateway

import (
	"sync"

	"github.com/exechost/exechost/internal/bridge"
)

// Bounds per authenticated caller. An issued credential is one caller
// however many connections it opens; the gateway token (the machine
// owner's, every local CLI proves it) is another, with more room. Without
// them one agent credential held 150 connections, each stalled with 4 MB
// of a frame: a gigabyte of gateway memory, never returned.
const (
	// MaxConnsPerCredential bounds the open connections of one issued
	// credential.
	MaxConnsPerCredential = 16
	// MaxConnsPerToken bounds the open connections proving the gateway
	// token (CLIs, the approver, `exechost mcp`, in-process clients).
	MaxConnsPerToken = 128
	// MaxAgentRequest is the read limit of a connection of an issued
	// agent credential, so one credential holds at most
	// MaxConnsPerCredential × MaxAgentRequest of partial frames. A command
	// is text an agent wrote; a larger one belongs in a file.
	MaxAgentRequest = 1 << 20
	// MaxPendingPerCaller bounds one caller's requests being answered at
	// once (an exec waiting for its run holds one).
	MaxPendingPerCaller = 64
	// MaxBytesPerCaller bounds the params bytes of one caller's requests
	// being answered at once.
	MaxBytesPerCaller = 16 << 20
)

// callerKey names the caller that bounds count: the credential id, or
// the gateway token.
func (c caller) key() string {
	if c.credential != "" {
		return "credential " + c.credential
	}
	return "token"
}

// readLimit is the largest frame a caller's connection reads.
func (c caller) readLimit() int64 {
	if c.credential != "" && c.role == bridge.RoleAgent {
		return MaxAgentRequest
	}
	return bridge.MaxFrame
}

// callerBounds counts what each caller holds. The zero value uses the
// package limits; tests lower them.
type callerBounds struct {
	mu  sync.Mutex
	use map[string]*callerUse

	maxConns, maxTokenConns, maxPending int
	maxBytes                            int64
}

type callerUse struct {
	conns, pending int
	bytes          int64
}

func (b *callerBounds) get(key string) *callerUse {
	if b.use == nil {
		b.use = make(map[string]*callerUse)
	}
	u := b.use[key]
	if u == nil {
		u = &callerUse{}
		b.use[key] = u
	}
	return u
}

// forget drops key's entry once it holds nothing (the map stays as large
// as the callers connected, not as every credential ever seen).
func (b *callerBounds) forget(key string, u *callerUse) {
	if u.conns == 0 && u.pending == 0 && u.bytes == 0 {
		delete(b.use, key)
	}
}

// connect takes a connection slot for c, or says why there is none.
func (b *callerBounds) connect(c caller) (release func(), err error) {
	limit := orDefault(b.maxConns, MaxConnsPerCredential)
	if c.credential == "" {
		limit = orDefault(b.maxTokenConns, MaxConnsPerToken)
	}
	key := c.key()
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.get(key)
	if u.conns >= limit {
		b.forget(key, u)
		return nil, bridge.Errorf(bridge.CodeBusy, "%s already has %d connections open (the limit)", key, limit).WithHint("close some, or share one connection; each agent should hold one")
	}
	u.conns++
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			u.conns--
			b.forget(key, u)
		})
	}, nil
}

// request takes room for one request of size bytes of c's, or says why
// there is none. The caller's other requests go on.
func (b *callerBounds) request(c caller, size int) (release func(), err error) {
	maxPending := orDefault(b.maxPending, MaxPendingPerCaller)
	maxBytes := b.maxBytes
	if maxBytes == 0 {
		maxBytes = MaxBytesPerCaller
	}
	key := c.key()
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.get(key)
	switch {
	case u.pending >= maxPending:
		b.forget(key, u)
		return nil, bridge.Errorf(bridge.CodeBusy, "%s has %d requests being answered (the limit)", key, maxPending).WithHint("wait for some to finish; exec with yieldMs returns early and exec.status polls")
	case u.bytes+int64(size) > maxBytes:
		b.forget(key, u)
		return nil, bridge.Errorf(bridge.CodeBusy, "%s has %d bytes of requests being answered; %d more exceeds the %d byte limit", key, u.bytes, size, maxBytes).WithHint("wait for some to finish")
	}
	u.pending++
	u.bytes += int64(size)
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		u.pending--
		u.bytes -= int64(size)
		b.forget(key, u)
	}, nil
}

func orDefault(n, def int) int {
	if n > 0 {
		return n
	}
	return def
}
