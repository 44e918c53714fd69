package gateway

import (
	"fmt"
	"strings"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/session"
)

// slashApprove runs `/approve ID DECISION` typed in a session's front-end.
// Only operator connections reach it (sessionCommand refuses agents). The
// answer records the operator and the session it was typed in.
func (g *Gateway) slashApprove(c caller, key session.Key, text string) (bridge.SessionCommandResult, error) {
	f := strings.Fields(text)
	if len(f) != 3 {
		return bridge.SessionCommandResult{}, bridge.Errorf(bridge.CodeInvalidRequest, "usage: /approve ID allow-once|allow-always|deny (ID may be a unique prefix)")
	}
	by := fmt.Sprintf("%s via /approve in session %s/%s", c.by(), key.Agent, key.Session)
	res, err := g.prompts.resolve(f[1], f[2], by)
	if err != nil {
		return bridge.SessionCommandResult{}, err
	}
	g.log.Info("approval resolved", "id", res.ID, "decision", res.Decision, "by", by)
	return bridge.SessionCommandResult{
		Reply:    fmt.Sprintf("approval %s: %s", res.ID, res.Decision),
		Settings: g.sessions.Settings(key),
	}, nil
}
