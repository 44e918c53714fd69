package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/lipgloss"

	"github.com/exechost/exechost/internal/approverui"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/textsafe"
)

var (
	titleStyle  = lipgloss.NewStyle().Bold(true)
	selStyle    = lipgloss.NewStyle().Bold(true).Reverse(true)
	labelStyle  = lipgloss.NewStyle().Faint(true)
	cmdStyle    = lipgloss.NewStyle().Bold(true)
	warnStyle   = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("9"))
	okStyle     = lipgloss.NewStyle().Foreground(lipgloss.Color("10"))
	statusStyle = lipgloss.NewStyle().Italic(true)
)

func (m model) View() string {
	var b strings.Builder
	head := fmt.Sprintf("exechost approver — %d pending", len(m.items))
	if m.opts.Title != "" {
		head += " — " + m.opts.Title
	}
	b.WriteString(titleStyle.Render(head) + "\n")
	if m.opts.Banner != "" {
		b.WriteString(m.opts.Banner + "\n")
	}
	b.WriteString("\n")

	if len(m.items) == 0 {
		b.WriteString("No pending prompts. Waiting for execution hosts…\n")
	}
	from, to := window(len(m.items), m.index(), maxRows)
	if from > 0 {
		fmt.Fprintf(&b, "   … %d more above\n", from)
	}
	for _, p := range m.items[from:to] {
		line := fmt.Sprintf(" %s  %-12s %-48s %8s ", short(p.ID), clip(textsafe.Line(p.Request.AgentID), 12),
			clip(textsafe.Line(p.Request.Command), 48), approverui.Countdown(p.ExpiresAt, m.now))
		if p.ID == m.selected {
			line = selStyle.Render(">" + line)
		} else {
			line = " " + line
		}
		b.WriteString(line + "\n")
	}
	if to < len(m.items) {
		fmt.Fprintf(&b, "   … %d more below\n", len(m.items)-to)
	}

	if p, ok := m.current(); ok {
		b.WriteString("\n" + titleStyle.Render("Prompt "+p.ID) + "\n")
		for _, f := range approverui.Describe(p, m.now) {
			v := f.Value
			switch {
			case f.Label == "command":
				v = cmdStyle.Render(v)
			case f.Label == "resolved" && strings.HasSuffix(v, "(allowlisted)"):
				v = okStyle.Render(v)
			case f.Label == "resolved":
				v = warnStyle.Render(v)
			case f.Label == "always" && strings.Contains(v, "!!"):
				v = warnStyle.Render(v)
			}
			fmt.Fprintf(&b, "  %s %s\n", labelStyle.Render(fmt.Sprintf("%-9s", f.Label+":")), v)
		}
		b.WriteString("\n" + keysHelp(p) + "\n")
	} else {
		b.WriteString("\nq quit\n")
	}
	if m.status != "" {
		b.WriteString("\n" + statusStyle.Render(clip(m.status, max(m.width-2, 20))) + "\n")
	}
	return b.String()
}

// keysHelp lists the decisions the prompt offers; allow always is hidden
// when the execution host did not offer it (ask=always).
func keysHelp(p prompt.Pending) string {
	var keys []string
	if prompt.Offered(p.Request, policy.AllowOnce) {
		keys = append(keys, "a allow once")
	}
	if prompt.Offered(p.Request, policy.AllowAlways) {
		keys = append(keys, "A allow always (asks to confirm)")
	}
	keys = append(keys, "d deny", "↑/↓ move", "q quit")
	return strings.Join(keys, " · ")
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n <= 1 {
		return string(r[:n])
	}
	return string(r[:n-1]) + "…"
}

// maxRows is how many queue rows are shown at once; the window follows the
// selection.
const maxRows = 8

// window returns the [from, to) slice of n rows to show so that sel is
// visible.
func window(n, sel, rows int) (from, to int) {
	if n <= rows {
		return 0, n
	}
	from = max(0, sel-rows/2)
	if from+rows > n {
		from = n - rows
	}
	return from, from + rows
}
