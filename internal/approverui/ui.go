package approverui

import (
	"context"
	"fmt"
	"io"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
)

// Env is what the approver daemon (internal/approver) hands the UI it
// starts.
type Env struct {
	// Queue holds the prompts to show and answer.
	Queue *prompt.Broker
	// Title names this approver (its socket path); Banner is a line to
	// show under it (the web UI's URL), or "".
	Title, Banner string
	// In, Out and Err are the approver's terminal.
	In       io.Reader
	Out, Err io.Writer
}

// UI shows the approver's queue to a human, or answers it, until ctx is
// done. The approver stops when Serve returns, so a UI the user quits
// ends the approver; an error is printed before it stops. A new UI is a
// package implementing UI plus its flag in internal/cli/approver.go
// (CONTRIBUTING, "Adding an approver UI").
type UI interface {
	Serve(ctx context.Context, env Env) error
}

// TerminalOwner is implemented by a UI that draws on the whole terminal
// (the TUI): the approver then keeps its log lines and the web UI's URL
// off the terminal and passes the URL as Env.Banner instead.
type TerminalOwner interface {
	OwnsTerminal() bool
}

// OwnsTerminal reports whether ui draws on the whole terminal.
func OwnsTerminal(ui UI) bool {
	t, ok := ui.(TerminalOwner)
	return ok && t.OwnsTerminal()
}

// Lines is the plain line mode (RunLines) as a UI; By names it in
// decisions ("approver lines").
type Lines struct{ By string }

// Serve implements UI.
func (l Lines) Serve(ctx context.Context, env Env) error {
	RunLines(ctx, env.Queue, env.In, env.Out, l.By)
	return nil
}

// Auto answers every prompt with Decision (AutoDecide) as a UI, for
// scripted environments and tests; By names it in decisions. It warns on
// Err first: no human is asked.
type Auto struct {
	Decision policy.Approval
	By       string
}

// Serve implements UI.
func (a Auto) Serve(ctx context.Context, env Env) error {
	fmt.Fprintf(env.Err, "WARNING: auto-deciding %s for every prompt (no human is asked)\n", a.Decision)
	AutoDecide(ctx, env.Queue, a.Decision, a.By)
	return nil
}
