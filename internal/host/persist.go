package host

import (
	"strings"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/shellcmd"
)

// persist records the command's executables in the agent's allowlist after
// an allow-always. Only exact, precise paths are recorded (never a shell,
// interpreter or wrapper); the returned text tells the caller what happened,
// including when nothing could be recorded.
func (e *Engine) persist(p *Prepared) string {
	paths, notes := shellcmd.Recordable(p.Analysis)
	if len(paths) == 0 {
		msg := "; nothing recorded for allow-always"
		if len(notes) > 0 {
			msg += ": " + strings.Join(notes, "; ")
		}
		return msg
	}
	sums := make([]string, len(paths))
	for i, path := range paths {
		sums[i] = e.digests.sha256Of(path)
	}
	_, err := e.approvalsStore().Update(func(f *approvals.File) error {
		for i, path := range paths {
			f.AddPinned(p.Agent, path, sums[i])
		}
		return nil
	})
	if err != nil {
		return "; allow-always not recorded: " + err.Error()
	}
	msg := "; recorded " + strings.Join(paths, ", ") + " for agent " + p.Agent
	if len(notes) > 0 {
		msg += " (not recorded: " + strings.Join(notes, "; ") + ")"
	}
	return msg
}

// recordUse queues lastUsedAt/lastUsedCommand/lastResolvedPath stamps for
// the entries that matched; usage.go writes them in batches.
func (e *Engine) recordUse(p *Prepared) {
	now := e.now()
	segs := p.Analysis.Segments
	for i, pat := range p.Matched {
		if pat == "" || i >= len(segs) {
			continue
		}
		real := segs[i].RealPath
		if real == "" {
			real = segs[i].ResolvedPath
		}
		e.usage.add(e, useKey{agent: p.Agent, pattern: pat}, useStamp{command: p.Text, path: real, at: now})
	}
}
