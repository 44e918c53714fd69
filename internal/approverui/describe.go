package approverui

import (
	"strings"
	"time"

	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/textsafe"
)

// Field is one labelled line of a prompt's description.
type Field struct {
	Label, Value string
}

// Describe lists everything a human needs to decide on p, in display
// order, as plain text (control characters escaped so a crafted command
// cannot repaint the terminal). The line mode and the TUI both use it, so
// every UI shows the same facts.
func Describe(p prompt.Pending, now time.Time) []Field {
	r := p.Request
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return textsafe.Line(s)
	}
	fs := []Field{
		{"agent", dash(r.AgentID)},
		{"session", dash(r.SessionKey)},
		{"host", dash(r.Host) + nodeSuffix(r.NodeID)},
		{"cwd", dash(r.Cwd)},
		{"command", dash(r.Command)},
	}
	if len(r.Argv) > 0 && r.Command == "" {
		fs[4].Value = textsafe.Line(strings.Join(r.Argv, " "))
	}
	if c := strings.TrimSuffix(r.Canonical, "\n"); c != "" && c != strings.TrimSpace(r.Command) {
		fs = append(fs, Field{"canonical", textsafe.Line(c)})
	}
	if r.Confinement != "" {
		fs = append(fs, Field{"confined", textsafe.Line(r.Confinement)})
	}
	if r.RunsAs != "" {
		fs = append(fs, Field{"runs as", textsafe.Line(RunsAsText(r.RunsAs))})
	}
	for _, x := range r.Executables {
		fs = append(fs, Field{"starts", textsafe.Line(x)})
	}
	if len(r.ResolvedPaths) == 0 {
		fs = append(fs, Field{"resolved", "(none: the command could not be analysed)"})
	}
	for i, path := range r.ResolvedPaths {
		mark := "not allowlisted"
		if i < len(r.Allowlisted) && r.Allowlisted[i] {
			mark = "allowlisted"
		}
		fs = append(fs, Field{"resolved", textsafe.Line(path) + " (" + mark + ")"})
	}
	fs = append(fs,
		Field{"why", dash(r.Reason)},
		Field{"policy", "security=" + dash(r.Security) + " ask=" + dash(r.Ask)},
	)
	exp := "in " + Countdown(p.ExpiresAt, now)
	if r.Fallback != "" {
		exp += " (then askFallback=" + textsafe.Line(r.Fallback) + ")"
	}
	fs = append(fs, Field{"expires", exp}, Field{"peer", dash(p.Peer)})
	for _, l := range AllowAlwaysLines(r) {
		fs = append(fs, Field{"always", AlwaysText(l)})
	}
	return fs
}

// RunsAsText explains prompt.Request.RunsAs to a human.
func RunsAsText(how string) string {
	switch how {
	case "interpreter":
		return "interpreter: the tree above runs, and nothing but the executables below may start"
	case "direct":
		return "direct: the executable below starts with these words, no shell"
	case "interpreter, unchecked":
		return "interpreter, unchecked: the analysis could not vouch for it; whatever it starts runs"
	case "shell text":
		return "runs as shell text (/bin/sh -c): nothing checks what it starts"
	}
	return how
}

func nodeSuffix(node string) string {
	if node == "" {
		return ""
	}
	return " (node " + textsafe.Line(NodeLabel(node)) + ")"
}

// NodeLabel is how a prompt shows the node it came from: a key-derived id
// (64 hex digits, unreadable) by its first 8, which `--node` still
// selects; a name as it is.
func NodeLabel(id string) string {
	if len(id) == 64 && strings.Trim(id, "0123456789abcdef") == "" {
		return id[:8] + "…"
	}
	return id
}

// Countdown formats the time left until t, rounded to seconds; "expired"
// once t has passed.
func Countdown(t, now time.Time) string {
	if t.IsZero() {
		return "?"
	}
	d := t.Sub(now)
	if d <= 0 {
		return "expired"
	}
	return d.Round(time.Second).String()
}
