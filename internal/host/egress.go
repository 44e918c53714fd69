package host

// Egress by name (docs/policy.md, "Egress by name"): a run whose
// confine.network is a list of host[:port] patterns starts in the jail
// with network none and one way out, a relay on the jail's own loopback
// (egressAddr) to the engine's egress proxy (internal/egress), which
// reaches only the names on the list. The run is given
// HTTP(S)_PROXY/ALL_PROXY naming that relay with credentials of its own
// (a lease: run id and a token), so every connection is tied to the run
// and its agent. A name on no pattern, under ask, is put to the engine's
// Prompter as a command is; every connection and every answer goes to
// the audit log (Event "egress").

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/egress"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/jail"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/runner"
)

// egressAddr is where a jailed run reaches the proxy: the relay on its
// jail's own loopback (every jail has its own, so one address serves all).
const egressAddr = "127.0.0.1:3128"

// egressEnv are the variables that name the proxy to a run's programs
// (curl, git, go, npm, pip read one spelling or the other).
var egressEnv = []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"}

// egressState is the engine's egress proxy, started on the first run
// that needs it and closed with the engine.
type egressState struct {
	mu     sync.Mutex
	proxy  *egress.Proxy
	dir    string // private directory of the proxy's socket
	sock   string
	closed bool
	runs   map[string]*egressRun
	// resolver resolves allowed names (net.DefaultResolver when nil);
	// tests name their local servers with it.
	resolver egress.Resolver
}

// egressRun is what the proxy's asker and recorder need of a run.
type egressRun struct {
	req Request
	p   *Prepared
	// reach, when set, is the reach line prompts show (a sandbox run's:
	// the engine's jail is not where it runs).
	reach string
}

// egressOf is the run's egress list; nil when its network is not one.
func egressOf(p *Prepared) []string {
	if p == nil || p.Resolved.Confine == nil {
		return nil
	}
	return p.Resolved.Confine.Egress
}

// egressRelay is the relay a jail for p's run needs (nil when its
// network is no egress list), starting the engine's proxy if it is not
// yet running.
func (e *Engine) egressRelay(p *Prepared) (*jail.EgressRelay, error) {
	if egressOf(p) == nil {
		return nil, nil
	}
	sock, err := e.egressProxy()
	if err != nil {
		return nil, err
	}
	return &jail.EgressRelay{Socket: sock, Addr: egressAddr, Policy: egressPolicy(p)}, nil
}

// egressProxy starts the proxy on first use and returns its socket.
func (e *Engine) egressProxy() (string, error) {
	s := &e.egr
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", errors.New("egress: the engine is closed")
	}
	if s.proxy != nil {
		return s.sock, nil
	}
	// A directory of its own (0700) in the host's temporary directory:
	// a unix socket path must be short, and only this user may connect.
	dir, err := os.MkdirTemp("", "exechost-egress-")
	if err != nil {
		return "", hint.Wrap(fmt.Errorf("egress: proxy directory: %w", err), "the egress proxy listens in the host's temporary directory; check that it is writable")
	}
	sock := filepath.Join(dir, "proxy.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("egress: proxy socket: %w", err)
	}
	timeout := e.PromptTimeout
	if timeout <= 0 {
		timeout = DefaultPromptTimeout
	}
	opts := []egress.Option{egress.WithAsker(egressAsker{e}), egress.WithRecorder(egressRecorder{e}), egress.WithClock(e.now), egress.WithAskTimeout(timeout)}
	if s.resolver != nil {
		opts = append(opts, egress.WithResolver(s.resolver))
	}
	s.proxy, s.dir, s.sock = egress.New(opts...), dir, sock
	s.runs = map[string]*egressRun{}
	go s.proxy.Serve(ln) //nolint:errcheck // ends with Close
	return sock, nil
}

// closeEgress ends the proxy and every connection through it.
func (e *Engine) closeEgress() {
	s := &e.egr
	s.mu.Lock()
	px, dir := s.proxy, s.dir
	s.proxy, s.closed = nil, true
	s.mu.Unlock()
	if px != nil {
		px.Close()
		os.RemoveAll(dir)
	}
}

// takeEgress gives a jailed run its lease on the proxy: the run's list,
// ask and askFallback, and the proxy variables naming its relay with its
// credentials. It returns done extended to end the lease (cutting the
// run's open connections) once the run has ended.
func (e *Engine) takeEgress(spec *runner.Spec, p *Prepared, req Request, done func()) (func(), error) {
	list := egressOf(p)
	if list == nil || spec.Jail == nil {
		return done, nil
	}
	_, env, end, err := e.leaseEgress(p, req, egressAddr, "")
	if err != nil {
		return done, err
	}
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	maps.Copy(spec.Env, env)
	return func() {
		end()
		done()
	}, nil
}

// leaseEgress registers p's run on the running proxy: its list, ask and
// askFallback, for the asker and recorder its request (and reach, the
// line its prompts show when set). It returns the proxy, the variables
// that name the proxy at addr with the run's credentials, and end, which
// ends the lease (cutting the run's open connections).
func (e *Engine) leaseEgress(p *Prepared, req Request, addr, reach string) (*egress.Proxy, map[string]string, func(), error) {
	s := &e.egr
	s.mu.Lock()
	px := s.proxy
	s.mu.Unlock()
	if px == nil {
		return nil, nil, nil, errors.New("egress: the proxy is not running")
	}
	pats := p.Resolved.Confine.EgressPatterns()
	run := egress.Run{
		ID: req.RunID, Agent: p.Agent, Command: p.Text, Patterns: pats,
		Ask:           p.Effective.Ask != policy.AskOff,
		FallbackAllow: p.Effective.Fallback == policy.FallbackFull,
	}
	lease, err := px.Register(run)
	if err != nil {
		return nil, nil, nil, err
	}
	if req.AgentID == "" {
		req.AgentID = p.Agent
	}
	s.mu.Lock()
	s.runs[req.RunID] = &egressRun{req: req, p: p, reach: reach}
	s.mu.Unlock()
	env := map[string]string{}
	u := lease.ProxyURLAt(addr)
	for _, n := range egressEnv {
		env[n] = u
	}
	// Nothing is exempt from the proxy: a host's NO_PROXY would send
	// those names straight at a network the run does not have.
	env["NO_PROXY"], env["no_proxy"] = "", ""
	return px, env, func() {
		lease.Close()
		s.mu.Lock()
		delete(s.runs, req.RunID)
		s.mu.Unlock()
	}, nil
}

// egressRunOf is the run a proxy question or record is about.
func (e *Engine) egressRunOf(id, agent string) *egressRun {
	e.egr.mu.Lock()
	r := e.egr.runs[id]
	e.egr.mu.Unlock()
	if r == nil {
		return &egressRun{req: Request{RunID: id, AgentID: agent}}
	}
	return r
}

// egressRecorder puts every connection on the audit log.
type egressRecorder struct{ e *Engine }

func (r egressRecorder) RecordEgress(rec egress.Record) {
	e := r.e
	run := e.egressRunOf(rec.RunID, rec.AgentID)
	d := policy.Decision{Outcome: policy.Allow, Reason: rec.Rule}
	if !rec.Allowed {
		d = policy.Decision{Outcome: policy.DenyRun, Reason: rec.Refused}
	}
	if rec.Error != "" {
		d.Reason = strings.TrimPrefix(d.Reason+"; failed: "+rec.Error, "; ")
	}
	e.audit(AuditRecord{Event: audit.EventEgress, Request: run.req, Host: e.Host, NodeID: e.NodeID, Decision: d, DecidedBy: "egress", egress: &rec})
}

// egressAsker puts a connection to a name on no pattern to the engine's
// Prompter, as a command's miss is put.
type egressAsker struct{ e *Engine }

func (a egressAsker) AskEgress(ctx context.Context, q egress.Question) (egress.Decision, error) {
	e := a.e
	if e.Prompter == nil {
		return egress.Deny, errNoPrompter
	}
	run := e.egressRunOf(q.RunID, q.AgentID)
	p := run.p
	if p == nil {
		return egress.Deny, errors.New("the run has ended")
	}
	target := q.Target.String()
	choices := []string{string(policy.AllowOnce), string(policy.AllowAlways), string(policy.Reject)}
	if p.Effective.Ask == policy.AskAlways {
		choices = []string{string(policy.AllowOnce), string(policy.Reject)}
	}
	level := p.Resolved.Confine.Sources["network"]
	pr := prompt.Request{
		Command: fmt.Sprintf("`%s` in run %s wants %s", commandName(p), shortRun(q.RunID), target),
		Argv:    run.req.Argv, Cwd: p.Cwd, Host: string(e.Host),
		Security: string(p.Effective.Security), Ask: string(p.Effective.Ask),
		AgentID: q.AgentID, SessionKey: run.req.SessionKey, NodeID: e.NodeID,
		Reason:  "egress: " + target + " is on no egress pattern of " + level,
		Choices: choices, Fallback: string(p.Effective.Fallback),
		Confinement: run.reach,
	}
	if pr.Confinement == "" {
		pr.Confinement = e.ConfinementText(p)
	}
	if dl, ok := ctx.Deadline(); ok {
		pr.ExpiresAtMs = dl.UnixMilli()
	}
	if len(choices) == 3 {
		pr.AllowAlways = &prompt.AllowAlwaysPlan{Add: []string{level + ".confine.network: " + target}}
	}
	ans, by, err := e.Prompter.Prompt(ctx, pr)
	if err != nil {
		return egress.Deny, err
	}
	d, note := egress.Deny, ""
	switch ans {
	case policy.AllowOnce:
		d = egress.AllowOnce
	case policy.AllowAlways:
		d = egress.AllowOnce
		if len(choices) == 3 {
			d = egress.AllowAlways
			note = e.persistEgress(level, target)
		}
	}
	// The answer is on the record before the connection is let through.
	out := policy.Decision{Outcome: policy.DenyRun, Reason: "egress " + target + ": " + string(ans) + note}
	if d != egress.Deny {
		out.Outcome = policy.Allow
	}
	e.audit(AuditRecord{Event: audit.EventEgress, Request: run.req, Host: e.Host, NodeID: e.NodeID, Decision: out, DecidedBy: by, Approval: ans,
		egress: &egress.Record{RunID: q.RunID, AgentID: q.AgentID, Host: q.Target.Host, Port: q.Target.Port, Allowed: d != egress.Deny, Rule: "approval " + string(ans)}})
	return d, nil
}

// persistEgress adds target to level's egress list in exec-approvals.json
// (the locked writer keeps every other entry) and says what it did.
func (e *Engine) persistEgress(level, target string) string {
	changed := false
	_, err := e.approvalsStore().Update(func(f *approvals.File) error {
		var err error
		changed, err = approvals.AddEgress(f, level, target)
		return err
	})
	switch {
	case err != nil:
		return "; allow-always not recorded: " + err.Error()
	case !changed:
		return "; " + target + " was on " + level + ".confine.network already"
	}
	return "; recorded " + target + " in " + level + ".confine.network"
}

// commandName is the program a run starts, as a prompt names it.
func commandName(p *Prepared) string {
	if len(p.argv) > 0 {
		return filepath.Base(p.argv[0])
	}
	if f := strings.Fields(p.Text); len(f) > 0 {
		return filepath.Base(f[0])
	}
	return "the run"
}

// shortRun is a run id as a prompt shows it.
func shortRun(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// egressTarget is a record's host:port.
func egressTarget(r *egress.Record) string {
	if r.Port == 0 {
		return r.Host
	}
	return net.JoinHostPort(r.Host, fmt.Sprint(r.Port))
}

// egressReach names the run's egress list in its reach line, where the
// confinement alone says "network: none".
func egressReach(p *Prepared, text string) string {
	list := egressOf(p)
	if list == nil {
		return text
	}
	names := "no names"
	if len(list) > 0 {
		names = strings.Join(list, ", ")
	}
	how := "others refused"
	if p.Effective.Ask != policy.AskOff {
		how = "others asked (askFallback " + string(p.Effective.Fallback) + ")"
	}
	return strings.Replace(text, "network: none", "network: none but egress by name through exechost's proxy to "+names+"; "+how, 1)
}

// egressRelayIfRunning is egressRelay without starting the proxy: what
// the reach line's jail report uses, so that `approvals check` or a
// prompt starts no proxy (the report then builds the jail without the
// relay, which holds the same layers).
func (e *Engine) egressRelayIfRunning(p *Prepared) *jail.EgressRelay {
	if egressOf(p) == nil {
		return nil
	}
	e.egr.mu.Lock()
	defer e.egr.mu.Unlock()
	if e.egr.proxy == nil {
		return nil
	}
	return &jail.EgressRelay{Socket: e.egr.sock, Addr: egressAddr, Policy: egressPolicy(p)}
}

// egressPolicy tells jails of different egress policies apart: a run
// that can read another run's environment in its jail could take its
// proxy credentials, so runs sharing a jail share an agent, a list, ask
// and askFallback.
func egressPolicy(p *Prepared) string {
	return strings.Join([]string{p.Agent, string(p.Effective.Ask), string(p.Effective.Fallback), strings.Join(egressOf(p), " ")}, "\x00")
}
