package cli

import (
	"fmt"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/state"
)

// localEngine builds the execution-host engine for commands that run on
// this machine without a gateway (`exechost run`): this state directory's
// approvals, the local approver socket for prompts, and the audit log.
// A malformed approvals file is an error here, before anything can run.
func (g *globals) localEngine(dir string) (*host.Engine, error) {
	e, _, err := g.localEngineAudited(dir)
	return e, err
}

// localEngineAudited is localEngine that also returns the audit recorder
// its runs go to (nil when the log is unavailable), for the gateway to
// record its own decisions in the same log.
func (g *globals) localEngineAudited(dir string) (*host.Engine, *audit.Recorder, error) {
	if err := state.Ensure(dir); err != nil {
		return nil, nil, err
	}
	s := approvals.NewStore(dir)
	// Ensure creates the file (with its token) on first use and refuses a
	// malformed one before anything can run.
	if _, err := s.Ensure(); err != nil {
		return nil, nil, err
	}
	enableReaper(g)
	e := host.NewEngine(dir, policy.HostGateway, "local")
	e.Prompter = &host.SocketPrompter{Store: s}
	rec := g.auditRecorder(dir)
	if rec != nil {
		e.OnAudit = host.AuditTo(rec.Log(), rec.Warn)
	}
	return e, rec, nil
}

// enableReaper makes sure commands this process starts die with it, even
// when it is SIGKILLed (see runner.EnableReaper); without it they still
// die on timeout and when the process shuts down normally.
func enableReaper(g *globals) {
	if err := runner.EnableReaper(); err != nil {
		fmt.Fprintf(g.stderr, "exechost: WARNING: %v; commands may outlive this process if it is killed\n", err)
	}
}
