package approverui

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/exechost/exechost/internal/prompt"
)

// TestLineModeShowsNoBidiOrControl: a prompt whose command, cwd, agent and
// resolved path carry bidi isolates and overrides, zero-width characters
// and a terminal escape reaches the line mode only as visible escapes, and
// allow-always lines are shown with the program that runs anything
// flagged.
func TestLineModeShowsNoBidiOrControl(t *testing.T) {
	b := prompt.NewBroker()
	pr, pw := io.Pipe()
	defer pw.Close()
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go RunLines(ctx, b, pr, out, "approver lines")

	evil := "ls \u2066\u202d-la\u2069\u200b\ufeff\x1b[2J\u202e"
	req := sampleRequest
	req.Command, req.Cwd, req.AgentID = evil, "/tmp/\u2067x", "m\u202ein"
	req.ResolvedPaths = []string{"/usr/bin/l\u200bs", "/usr/bin/find"}
	req.Allowlisted = []bool{false, false}
	req.AllowAlways = &prompt.AllowAlwaysPlan{Add: []string{"/usr/bin/find"}, Skipped: []string{"sh -c: a shell is never recorded"}}
	go b.Submit(ctx, prompt.Pending{ID: "bidi1111", Request: req, ExpiresAt: time.Now().Add(time.Hour)})
	waitFor(t, out, `always:   not added: sh -c`)

	got := out.String()
	for _, line := range strings.Split(strings.TrimRight(got, "\n"), "\n") {
		for _, r := range line {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
				t.Fatalf("line mode printed %U raw: %q", r, line)
			}
		}
	}
	for _, want := range []string{`\u2066\u202d-la\u2069\u200b\ufeff\x1b[2J\u202e`, `/tmp/\u2067x`, `m\u202ein`, `/usr/bin/l\u200bs`,
		"always:   adds /usr/bin/find  !! can run anything: -exec"} {
		if !strings.Contains(got, want) {
			t.Errorf("line mode output lacks %q:\n%s", want, got)
		}
	}
}
