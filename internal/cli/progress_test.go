package cli

import (
	"bytes"
	"testing"
	"time"
)

// TestProgressSilentOffTerminal checks that pipes and files never get
// spinner output, however long the wait.
func TestProgressSilentOffTerminal(t *testing.T) {
	var buf bytes.Buffer
	stop := startProgress(&buf, "waiting")
	time.Sleep(900 * time.Millisecond) // past the spinner's start delay
	stop()
	stop() // idempotent
	if buf.Len() != 0 {
		t.Fatalf("progress wrote %q to a non-terminal", buf.String())
	}
}
