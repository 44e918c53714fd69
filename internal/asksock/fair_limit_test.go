package asksock

import (
	"testing"

	"github.com/exechost/exechost/internal/prompt"
)

// TestFairStaysBelowConnLimit: prompt.Fair exists so that one agent's flood
// waits its turn instead of taking every connection the approver admits
// from one process; that holds only while its total stays below the
// per-peer limit (prompt cannot import this package to derive it).
func TestFairStaysBelowConnLimit(t *testing.T) {
	if prompt.DefaultFairTotal >= DefaultMaxConnsPerPeer {
		t.Fatalf("prompt.DefaultFairTotal = %d, want below DefaultMaxConnsPerPeer = %d", prompt.DefaultFairTotal, DefaultMaxConnsPerPeer)
	}
}
