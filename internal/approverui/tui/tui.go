// Package tui is the approver's terminal UI (`exechost approver --tui`): a
// queue of pending prompts from the approval socket, the selected prompt in
// full (agent, session, host, cwd, command, every resolved executable and
// whether it is already allowlisted, why it was asked, the countdown to
// askFallback) and one key per decision. It only talks to an
// prompt.Broker, so it shows exactly what the line mode and web UI show.
package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/exechost/exechost/internal/approverui"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/textsafe"
)

// By is how the TUI names itself in decisions ("approved by approver tui").
const By = "approver tui"

// Options configure Run.
type Options struct {
	// In and Out default to the process's terminal.
	In  io.Reader
	Out io.Writer
	// Title is shown in the header (for example the socket path).
	Title string
	// Banner is a line shown under the header (for example the web UI's
	// URL).
	Banner string
}

// Run shows the TUI until the user quits (q, ctrl+c) or ctx is done.
// Prompts still queued when it quits stay queued (other UIs may answer
// them) until the approver stops.
func Run(ctx context.Context, b *prompt.Broker, o Options) error {
	ch, stop := b.Subscribe()
	defer stop()
	m := newModel(b, ch, o)
	opts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithAltScreen()}
	if o.In != nil {
		opts = append(opts, tea.WithInput(o.In))
	}
	if o.Out != nil {
		opts = append(opts, tea.WithOutput(o.Out))
	}
	_, err := tea.NewProgram(m, opts...).Run()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("terminal UI: %w", err)
	}
	return nil
}

// model is the bubbletea model. items mirrors b.List(); selected is kept by
// id so the cursor stays on its prompt when others come and go.
type model struct {
	b        *prompt.Broker
	changes  <-chan prompt.Change
	opts     Options
	items    []prompt.Pending
	selected string
	status   string
	now      time.Time
	width    int
	// confirm is the id of the prompt whose allow-always waits for "y":
	// allow-always writes to the allowlist for good, so one stray key
	// must not do it.
	confirm string
}

type changeMsg struct {
	c  prompt.Change
	ok bool
}

type tickMsg time.Time

func newModel(b *prompt.Broker, ch <-chan prompt.Change, o Options) model {
	m := model{b: b, changes: ch, opts: o, now: time.Now(), width: 100}
	m.refresh()
	return m
}

func (m model) Init() tea.Cmd { return tea.Batch(m.waitChange(), tick()) }

func (m model) waitChange() tea.Cmd {
	return func() tea.Msg {
		c, ok := <-m.changes
		return changeMsg{c, ok}
	}
}

func tick() tea.Cmd {
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return tickMsg(t) })
}

// refresh reloads the queue and keeps the selection valid.
func (m *model) refresh() {
	m.items = m.b.List()
	if m.index() < 0 {
		m.selected = ""
		if len(m.items) > 0 {
			m.selected = m.items[0].ID
		}
	}
}

func (m model) index() int {
	for i, p := range m.items {
		if p.ID == m.selected {
			return i
		}
	}
	return -1
}

func (m model) current() (prompt.Pending, bool) {
	if i := m.index(); i >= 0 {
		return m.items[i], true
	}
	return prompt.Pending{}, false
}

func (m model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case changeMsg:
		if !msg.ok {
			return m, tea.Quit
		}
		m.refresh()
		m.status = describeChange(msg.c)
		return m, m.waitChange()
	case tickMsg:
		m.now = time.Time(msg)
		m.refresh()
		return m, tick()
	case tea.WindowSizeMsg:
		m.width = msg.Width
		return m, nil
	case tea.KeyMsg:
		return m.key(msg)
	}
	return m, nil
}

func (m model) key(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	if m.confirm != "" {
		id := m.confirm
		m.confirm = ""
		if p, ok := m.current(); ok && p.ID == id && (k.String() == "y" || k.String() == "Y") {
			m.decide(policy.AllowAlways)
			return m, nil
		}
		m.status = "allow always cancelled"
		return m, nil // the key that cancels does nothing else
	}
	switch k.String() {
	case "ctrl+c", "q":
		return m, tea.Quit
	case "up", "k":
		if i := m.index(); i > 0 {
			m.selected = m.items[i-1].ID
		}
	case "down", "j":
		if i := m.index(); i >= 0 && i < len(m.items)-1 {
			m.selected = m.items[i+1].ID
		}
	case "a":
		m.decide(policy.AllowOnce)
	case "A":
		m.askAlways()
	case "d":
		m.decide(policy.Reject)
	}
	return m, nil
}

// askAlways shows what allow-always would add and waits for "y".
func (m *model) askAlways() {
	p, ok := m.current()
	if !ok {
		m.status = "nothing to answer"
		return
	}
	if !prompt.Offered(p.Request, policy.AllowAlways) {
		m.status = fmt.Sprintf("%s is not offered for %s", policy.AllowAlways, short(p.ID))
		return
	}
	m.confirm = p.ID
	var parts []string
	for _, l := range approverui.AllowAlwaysLines(p.Request) {
		parts = append(parts, approverui.AlwaysText(l))
	}
	// The question first: a narrow terminal clips the status line, and
	// the patterns are listed in full under "always:" above it.
	m.status = "allow always for " + short(p.ID) + "? press y to confirm, any other key cancels — " + strings.Join(parts, "; ")
}

// decide answers the selected prompt. The queue refresh comes with the
// broker's change notification.
func (m *model) decide(a policy.Approval) {
	p, ok := m.current()
	if !ok {
		m.status = "nothing to answer"
		return
	}
	if !prompt.Offered(p.Request, a) {
		m.status = fmt.Sprintf("%s is not offered for %s", a, short(p.ID))
		return
	}
	if err := m.b.Resolve(p.ID, a, By); err != nil {
		m.status = "error: " + err.Error()
	}
	m.refresh()
}

func describeChange(c prompt.Change) string {
	cmd := textsafe.Line(c.Pending.Request.Command)
	switch c.Kind {
	case prompt.ChangeAdded:
		return "new prompt " + short(c.Pending.ID) + ": " + cmd
	case prompt.ChangeResolved:
		return fmt.Sprintf("%s %s by %s: %s", short(c.Pending.ID), c.Decision, textsafe.Line(c.By), cmd)
	case prompt.ChangeExpired:
		return short(c.Pending.ID) + " expired (askFallback applied): " + cmd
	}
	return ""
}

// short is an id's first 8 characters, enough to tell prompts apart.
func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// UI is the TUI as an approverui.UI: `exechost approver --tui`.
type UI struct{}

// Serve implements approverui.UI: Run with the approver's title and banner.
func (UI) Serve(ctx context.Context, env approverui.Env) error {
	return Run(ctx, env.Queue, Options{Title: env.Title, Banner: env.Banner})
}

// OwnsTerminal implements approverui.TerminalOwner: the TUI draws on the
// whole terminal.
func (UI) OwnsTerminal() bool { return true }

var _ approverui.TerminalOwner = UI{}
