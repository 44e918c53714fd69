package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/charmbracelet/x/term"

	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/textsafe"
)

// progress shows a spinner with the elapsed time and what a command is
// waiting for, on a terminal only: scripts and pipes never see it. It is
// cleared from the line when the wait ends.
type progress struct {
	w    io.Writer
	stop chan struct{}
	done sync.WaitGroup
}

var spinFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(f.Fd())
}

// startProgress starts a spinner on w describing what the command waits
// for, after a short delay so that quick calls print nothing. The returned
// function stops and clears it; it is safe to call more than once.
func startProgress(w io.Writer, what string) (stop func()) {
	if !isTerminal(w) {
		return func() {}
	}
	p := &progress{w: w, stop: make(chan struct{})}
	p.done.Add(1)
	go p.run(what)
	var once sync.Once
	return func() {
		once.Do(func() { close(p.stop); p.done.Wait() })
	}
}

func (p *progress) run(what string) {
	defer p.done.Done()
	start := time.Now()
	delay := time.NewTimer(700 * time.Millisecond)
	defer delay.Stop()
	select {
	case <-p.stop:
		return
	case <-delay.C:
	}
	tick := time.NewTicker(120 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		fmt.Fprintf(p.w, "\r\x1b[2K%s %s (%s)", spinFrames[i%len(spinFrames)], what, time.Since(start).Truncate(time.Second))
		select {
		case <-p.stop:
			fmt.Fprint(p.w, "\r\x1b[2K")
			return
		case <-tick.C:
		}
	}
}

// progressPrompter shows a spinner while a prompt waits for a human, and
// says what happens if nobody answers.
type progressPrompter struct {
	inner host.Prompter
	w     io.Writer
}

// Prompt implements host.Prompter.
func (p progressPrompter) Prompt(ctx context.Context, req prompt.Request) (policy.Approval, string, error) {
	what := "waiting for approval of " + textsafe.Line(req.Command)
	if req.ExpiresAtMs > 0 {
		what += fmt.Sprintf("; askFallback=%s at %s", req.Fallback, time.UnixMilli(req.ExpiresAtMs).Format("15:04:05"))
	}
	stop := startProgress(p.w, what)
	defer stop()
	return p.inner.Prompt(ctx, req)
}
