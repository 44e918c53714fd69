package sandbox

import (
	"strings"
	"sync"
)

// HeadWriter keeps the first N bytes written to it and discards the rest
// without failing: backends collect a sandbox runtime's own error messages
// (bwrap's, the agent's) with it, bounded however much is written.
type HeadWriter struct {
	// N is how many bytes to keep.
	N  int
	mu sync.Mutex
	b  strings.Builder
}

// Write keeps what fits and reports everything written.
func (h *HeadWriter) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.N - h.b.Len(); room > 0 {
		h.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// String returns what was kept.
func (h *HeadWriter) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.b.String()
}
