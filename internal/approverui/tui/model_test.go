package tui

import (
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
)

type answer struct {
	a  policy.Approval
	by string
}

// queue submits prompts and waits until all are listed.
func queue(t *testing.T, b *prompt.Broker, ps ...prompt.Pending) map[string]chan answer {
	t.Helper()
	ch, stop := b.Subscribe()
	defer stop()
	out := map[string]chan answer{}
	for _, p := range ps {
		res := make(chan answer, 1)
		out[p.ID] = res
		go func() {
			a, by, _ := b.Submit(t.Context(), p)
			res <- answer{a, by}
		}()
	}
	for n := 0; n < len(ps); {
		if c := <-ch; c.Kind == prompt.ChangeAdded {
			n++
		}
	}
	return out
}

func press(m tea.Model, keys ...string) tea.Model {
	for _, k := range keys {
		var msg tea.KeyMsg
		switch k {
		case "down":
			msg = tea.KeyMsg{Type: tea.KeyDown}
		case "up":
			msg = tea.KeyMsg{Type: tea.KeyUp}
		default:
			msg = tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
		}
		m, _ = m.Update(msg)
	}
	return m
}

func TestModelKeys(t *testing.T) {
	onceOnly := prompt.Request{Command: "whoami", Choices: []string{"allow-once", "deny"}}
	tests := []struct {
		name string
		keys []string
		want map[string]policy.Approval // id → answer; others stay pending
	}{
		{"allow once first", []string{"a"}, map[string]policy.Approval{"p1": policy.AllowOnce}},
		{"allow always first, confirmed", []string{"A", "y"}, map[string]policy.Approval{"p1": policy.AllowAlways}},
		{"allow always cancelled", []string{"A", "n"}, map[string]policy.Approval{}},
		{"allow always cancelled by another key, which does nothing else", []string{"A", "d"}, map[string]policy.Approval{}},
		{"deny second", []string{"down", "d"}, map[string]policy.Approval{"p2": policy.Reject}},
		{"allow always not offered", []string{"down", "down", "A"}, map[string]policy.Approval{}},
		{"move past the end and back", []string{"down", "down", "down", "up", "a"}, map[string]policy.Approval{"p2": policy.AllowOnce}},
		{"answer all", []string{"a", "a", "d"}, map[string]policy.Approval{"p1": policy.AllowOnce, "p2": policy.AllowOnce, "p3": policy.Reject}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := prompt.NewBroker()
			res := queue(t, b,
				prompt.Pending{ID: "p1", Request: prompt.Request{Command: "ls"}},
			)
			more := queue(t, b,
				prompt.Pending{ID: "p2", Request: prompt.Request{Command: "id"}},
			)
			last := queue(t, b, prompt.Pending{ID: "p3", Request: onceOnly})
			res["p2"], res["p3"] = more["p2"], last["p3"]
			ch, stop := b.Subscribe()
			defer stop()
			m := press(newModel(b, ch, Options{}), tt.keys...)
			for id, want := range tt.want {
				if got := <-res[id]; got.a != want || got.by != By {
					t.Errorf("%s answered %q by %q, want %q by %q", id, got.a, got.by, want, By)
				}
			}
			if n := len(b.List()); n != 3-len(tt.want) {
				t.Errorf("%d prompts pending, want %d", n, 3-len(tt.want))
			}
			view := m.View()
			if tt.name == "allow always not offered" {
				if strings.Contains(view, "A allow always") || !strings.Contains(view, "not offered") {
					t.Errorf("view offers allow always or hides the refusal:\n%s", view)
				}
			}
		})
	}
}

func TestViewShowsEverything(t *testing.T) {
	b := prompt.NewBroker()
	queue(t, b, prompt.Pending{ID: "0123456789abcdef", Peer: "uid 0 pid 1", Request: prompt.Request{
		Command: "rg -n TODO | head\x1b[2J", AgentID: "main", SessionKey: "sess-1", Host: "node", NodeID: "laptop",
		Cwd: "/work", ResolvedPaths: []string{"/usr/bin/rg", "/usr/bin/head"}, Allowlisted: []bool{true, false},
		Reason: "allowlist-miss", Security: "allowlist", Ask: "on-miss", Fallback: "deny",
		AllowAlways: &prompt.AllowAlwaysPlan{Add: []string{"/usr/bin/rg", "/usr/bin/find"}, Skipped: []string{"bash x.sh: a shell is never recorded"}},
	}})
	ch, stop := b.Subscribe()
	defer stop()
	view := newModel(b, ch, Options{}).View()
	for _, want := range []string{
		"1 pending", "main", "sess-1", "node (node laptop)", "/work", `rg -n TODO | head\x1b[2J`,
		"/usr/bin/rg (allowlisted)", "/usr/bin/head (not allowlisted)", "allowlist-miss",
		"askFallback=deny", "a allow once · A allow always (asks to confirm) · d deny",
		"always:   adds /usr/bin/rg", "adds /usr/bin/find  !! can run anything: -exec/-execdir/-ok run any command",
		"not added: bash x.sh: a shell is never recorded",
	} {
		if !strings.Contains(view, want) {
			t.Errorf("view lacks %q:\n%s", want, view)
		}
	}
	if strings.Contains(view, "\x1b[2J") {
		t.Errorf("view passes a raw escape sequence from the command through")
	}
}

func TestWindow(t *testing.T) {
	tests := []struct{ n, sel, rows, from, to int }{
		{3, 0, 8, 0, 3},
		{20, 0, 8, 0, 8},
		{20, 10, 8, 6, 14},
		{20, 19, 8, 12, 20},
		{20, -1, 8, 0, 8},
	}
	for _, tt := range tests {
		if from, to := window(tt.n, tt.sel, tt.rows); from != tt.from || to != tt.to || tt.sel >= 0 && (tt.sel < from || tt.sel >= to) {
			t.Errorf("window(%d, %d, %d) = %d, %d; want %d, %d", tt.n, tt.sel, tt.rows, from, to, tt.from, tt.to)
		}
	}
}
