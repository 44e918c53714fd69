package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/shellcmd"
)

// Prepared is a command analysed against this host's policy, before any
// prompt: what Check reports and what Run acts on.
type Prepared struct {
	Agent     string
	Cwd       string
	Text      string // the command as a human should read it
	Effective policy.Effective
	Resolved  approvals.Resolved
	Analysis  shellcmd.Analysis
	Matched   []string // per segment: the pattern that matched, or ""
	Satisfied bool
	Decision  policy.Decision
	// argv is the request's argv, when it sent one instead of text: under
	// security=full it runs as given.
	argv []string
}

func (p *Prepared) input() policy.Input {
	return policy.Input{Effective: p.Effective, AnalysisOK: p.Analysis.OK, AnalysisError: p.Analysis.Error, AllowlistSatisfied: p.Satisfied}
}

// Prepare analyses req against the current exec-approvals.json and decides
// allow / ask / deny without running or prompting anything. A file that
// cannot be loaded fails closed with an error naming it. A fault of the
// request itself (a refused env name, a bad cwd, an empty command) is a
// bridge.InvalidRequest, so every host answers it with INVALID_REQUEST.
func (e *Engine) Prepare(req Request) (*Prepared, error) {
	for name := range req.Env {
		if policy.DangerousEnv(name) {
			return nil, bridge.InvalidRequest(fmt.Errorf("%w: env %s cannot be set by a request (it could change what runs) (hint: drop it from env)", runner.ErrDangerousEnv, name))
		}
	}
	agent := req.AgentID
	if agent == "" {
		agent = "*"
	}
	ap, err := e.agentPolicy(agent)
	if err != nil {
		return nil, err
	}
	cwd, err := e.cwd(req.Cwd)
	if err != nil {
		return nil, err
	}
	p := &Prepared{Agent: agent, Cwd: cwd, Resolved: ap.resolved}
	p.Effective = policy.Combine(req.Security, req.Ask, p.Resolved.Local)
	env := shellcmd.Env{Cwd: cwd, PATH: e.runPATH(), Home: e.Home}
	// An argv of exactly /bin/sh -c TEXT (what the gateway sends) is that
	// text. Any other argv is one simple command of literal words, analysed
	// and run by the same interpreter as text.
	if text, ok := shellText(req.Argv); ok {
		req.Argv, req.RawCommand = nil, text
	}
	switch {
	case len(req.Argv) > 0:
		p.argv = req.Argv
		p.Analysis = shellcmd.AnalyzeArgv(req.Argv, env)
		p.Text = req.RawCommand
		if p.Text == "" {
			p.Text = strings.Join(req.Argv, " ")
		}
	case strings.TrimSpace(req.RawCommand) != "":
		p.Analysis = shellcmd.Analyze(req.RawCommand, env)
		p.Text = req.RawCommand
	default:
		return nil, bridge.InvalidRequest(errors.New("empty command (hint: pass command text or an argv)"))
	}
	if p.Analysis.OK {
		p.Matched, p.Satisfied = ap.allow.MatchAll(p.Analysis.Paths())
	} else {
		p.Matched = make([]string, len(p.Analysis.Segments))
	}
	p.Decision = policy.Decide(p.input())
	return p, nil
}

// shellText returns TEXT for an argv of exactly ["/bin/sh", "-c", TEXT]:
// running that argv and running TEXT as command text are the same thing.
func shellText(argv []string) (string, bool) {
	if len(argv) == 3 && argv[0] == "/bin/sh" && argv[1] == "-c" && strings.TrimSpace(argv[2]) != "" {
		return argv[2], true
	}
	return "", false
}

func (e *Engine) cwd(c string) (string, error) {
	if c == "" {
		if e.Home != "" {
			return e.Home, nil
		}
		return os.Getwd()
	}
	c = policy.ExpandHome(c, e.Home)
	if !filepath.IsAbs(c) {
		return "", bridge.InvalidRequest(fmt.Errorf("cwd %q is not absolute (hint: pass an absolute path or ~/…)", c))
	}
	fi, err := os.Stat(c)
	if err != nil {
		return "", bridge.InvalidRequest(fmt.Errorf("cwd %s: %w", c, err))
	}
	if !fi.IsDir() {
		return "", bridge.InvalidRequest(fmt.Errorf("cwd %s: not a directory", c))
	}
	return filepath.Clean(c), nil
}
