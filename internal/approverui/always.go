package approverui

import (
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/shellcmd"
	"github.com/exechost/exechost/internal/textsafe"
)

// Kinds of AlwaysLine.
const (
	AlwaysAdd     = "add"     // a pattern allow-always adds
	AlwaysSkip    = "skip"    // an executable it leaves out, and why
	AlwaysNothing = "nothing" // it adds nothing: the approval applies once
	AlwaysUnknown = "unknown" // the execution host did not say
)

// AlwaysLine is one line of what allow-always would do, sanitised for
// display. Warning is set for a pattern whose program can run anything
// (shellcmd.RunsAnything): allowlisting it allows all of that.
type AlwaysLine struct {
	Kind    string `json:"kind"`
	Text    string `json:"text"`
	Warning string `json:"warning,omitempty"`
}

// AllowAlwaysLines describes what answering allow-always to r would do, for
// every UI (line mode and TUI through Describe, the web page, `approvals
// pending`): each pattern added, flagged when its program can run
// anything, and each executable skipped. Nil when the prompt does not
// offer allow-always.
func AllowAlwaysLines(r prompt.Request) []AlwaysLine {
	if !prompt.Offered(r, policy.AllowAlways) {
		return nil
	}
	plan := r.AllowAlways
	if plan == nil {
		return []AlwaysLine{{Kind: AlwaysUnknown, Text: "the execution host did not say which patterns allow-always adds (it records resolved executables, never shells, interpreters or wrappers)"}}
	}
	var out []AlwaysLine
	for _, p := range plan.Add {
		l := AlwaysLine{Kind: AlwaysAdd, Text: textsafe.Line(p)}
		if why, ok := shellcmd.RunsAnything(p); ok {
			l.Warning = "can run anything: " + why
		}
		out = append(out, l)
	}
	if len(plan.Add) == 0 {
		out = append(out, AlwaysLine{Kind: AlwaysNothing, Text: "adds nothing: the approval would apply once only"})
	}
	for _, s := range plan.Skipped {
		out = append(out, AlwaysLine{Kind: AlwaysSkip, Text: textsafe.Line(s)})
	}
	return out
}

// AlwaysText renders one AlwaysLine as plain text.
func AlwaysText(l AlwaysLine) string {
	switch l.Kind {
	case AlwaysAdd:
		s := "adds " + l.Text
		if l.Warning != "" {
			s += "  !! " + l.Warning
		}
		return s
	case AlwaysSkip:
		return "not added: " + l.Text
	}
	return l.Text
}
