package openclaw

import (
	"context"

	"github.com/exechost/exechost/internal/host"
)

// Runner is all the node needs from exechost's execution engine: decide
// and run one command (Run enforces exec-approvals.json, prompts or applies
// askFallback, caps output, kills the process tree on timeout or
// cancellation, audits), and describe without running what a request would
// run (Plan, for system.run.prepare). EngineRunner adapts *host.Engine;
// this interface is the one place to change when the engine's API does.
type Runner interface {
	Run(ctx context.Context, req host.Request) (host.Result, error)
	Plan(req host.Request) (Plan, error)
}

// Plan is the canonical description of what a system.run request will run
// on this host, and what this host's policy makes of it right now.
type Plan struct {
	// Argv is what runs: the request's argv, or /bin/sh -c TEXT for
	// command text that is not plain words.
	Argv []string
	// Cwd is the resolved working directory.
	Cwd string
	// CommandText is the command as a human reads it.
	CommandText string
	// Security and Ask are the effective policy (request combined with
	// this host's exec-approvals.json).
	Security, Ask string
	// Decision is allow, ask or deny before any prompt.
	Decision string
	// ResolvedPaths are the executables the analysis found ("" where one
	// did not resolve); AnalysisOK is false when the analysis failed.
	ResolvedPaths []string
	AnalysisOK    bool
	// Hash is the canonical command tree's sha256 (what an approval binds;
	// "" when the analysis vouched for nothing).
	Hash string
	// Programs are the programs the analysis found, with their argv: an
	// approval is also bound to their files and script operands.
	Programs []Program
}

// EngineRunner adapts exechost's engine to Runner.
func EngineRunner(e *host.Engine) Runner { return engineRunner{e} }

type engineRunner struct{ e *host.Engine }

func (r engineRunner) Run(ctx context.Context, req host.Request) (host.Result, error) {
	return r.e.Run(ctx, req)
}

// FlushUsage writes pending lastUsedAt stamps now.
func (r engineRunner) FlushUsage() error { return r.e.FlushUsage() }

func (r engineRunner) Plan(req host.Request) (Plan, error) {
	p, err := r.e.Prepare(req)
	if err != nil {
		return Plan{}, err
	}
	argv := req.Argv
	if len(argv) == 0 {
		// The engine runs text as /bin/sh -c TEXT (and treats that argv
		// as the same text), so this is exactly what will run.
		argv = []string{"/bin/sh", "-c", req.RawCommand}
	}
	progs := make([]Program, 0, len(p.Analysis.Segments))
	for _, s := range p.Analysis.Segments {
		progs = append(progs, Program{Argv: s.Argv, Path: s.ResolvedPath})
	}
	return Plan{
		Programs: progs,
		Argv:     argv, Cwd: p.Cwd, CommandText: p.Text,
		Security: string(p.Effective.Security), Ask: string(p.Effective.Ask),
		Decision:      string(p.Decision.Outcome),
		ResolvedPaths: p.Analysis.Paths(), AnalysisOK: p.Analysis.OK, Hash: p.Analysis.Hash,
	}, nil
}
