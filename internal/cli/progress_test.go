package cli

import (
	"bytes"
	"testing"
)

// TestProgressSilentOffTerminal checks that pipes and files never get
// spinner output: off a terminal startProgress starts no spinner at all
// (so there is no delay to wait past), and its stop is idempotent.
func TestProgressSilentOffTerminal(t *testing.T) {
	var buf bytes.Buffer
	stop := startProgress(&buf, "waiting")
	stop()
	stop() // idempotent
	if buf.Len() != 0 {
		t.Fatalf("progress wrote %q to a non-terminal", buf.String())
	}
}
