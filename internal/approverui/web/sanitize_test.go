package web

import (
	"context"
	"strings"
	"testing"
	"unicode"

	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/testproc"
)

// TestPendingTextIsSanitised: what the page shows of a prompt carries no
// bidi, zero-width or control character, only their visible escapes; the
// id the page sends back is untouched.
func TestPendingTextIsSanitised(t *testing.T) {
	c, b, _ := startAPI(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, stop := b.Subscribe()
	defer stop()
	evil := "rm -rf /\u202e\u2066 fdp.txt\u2069\u200b\x1b[2J"
	go b.Submit(ctx, prompt.Pending{ID: "p-bidi-1", Request: prompt.Request{
		Command: evil, Argv: []string{"rm", evil}, AgentID: "ag\u202ent", Cwd: "/tmp/\u2067x",
		ResolvedPaths: []string{"/usr/bin/r\u200bm"}}})
	testproc.Recv(t, ch, "the prompt's result")
	var list pendingList
	if code := c.get("api/pending", &list); code != 200 || len(list.Pending) != 1 {
		t.Fatalf("api/pending: %d %+v", code, list)
	}
	p := list.Pending[0]
	if p.ID != "p-bidi-1" {
		t.Errorf("id = %q", p.ID)
	}
	for _, s := range append([]string{p.Command, p.AgentID, p.Cwd, p.Paths[0].Path}, p.Argv...) {
		if strings.ContainsFunc(s, func(r rune) bool { return unicode.Is(unicode.Cf, r) || unicode.IsControl(r) }) {
			t.Errorf("page text %q keeps a control or format character", s)
		}
	}
	if !strings.Contains(p.Command, `\u202e`) || !strings.Contains(p.Command, `\x1b`) {
		t.Errorf("command %q does not show the escapes", p.Command)
	}
}
