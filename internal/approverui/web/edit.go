package web

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/textsafe"
)

// Outcomes of an edit that the page reports in words.
var (
	errNoEditor  = errors.New("no approvals file is edited here (the web approver was started without a state directory)")
	errDuplicate = errors.New("the pattern is already in this agent's allowlist")
	errNoEntry   = errors.New("no such pattern in this agent's allowlist (reload the page: it may have been removed)")
)

// staleMessage is what a human reads when their edit lost a race.
const staleMessage = "the file changed underneath (another editor, the CLI or an allow-always decision wrote it since this page loaded it); reload and redo your change"

// stateView is the payload of GET /api/state: the approvals file as the
// editor shows it. (The CSRF token comes from POST api/session.)
type stateView struct {
	NowMs   int64       `json:"nowMs"`
	Editor  bool        `json:"editor"`
	Gateway bool        `json:"gateway"`
	Hash    string      `json:"hash"`
	Agents  []agentView `json:"agents"`
	// Choices per setting, in the order a human reads them.
	Securities []string `json:"securities"`
	Asks       []string `json:"asks"`
	Fallbacks  []string `json:"fallbacks"`
}

// agentView is one agent entry: its own settings ("" inherits from "*",
// then defaults), what they resolve to, and its allowlist.
type agentView struct {
	ID          string       `json:"id"`
	Exists      bool         `json:"exists"`
	Security    string       `json:"security"`
	Ask         string       `json:"ask"`
	AskFallback string       `json:"askFallback"`
	Effective   policy.Local `json:"effective"`
	// Sources says which level supplied each effective value
	// ("agents.<id>", "agents.*", "defaults", "built-in").
	Sources map[string]string `json:"sources"`
	// Skipped lists invalid values that were passed over.
	Skipped   []string    `json:"skipped"`
	Warnings  []string    `json:"warnings"`
	Allowlist []entryView `json:"allowlist"`
	Inherited []entryView `json:"inherited"`
}

// entryView is one allowlist entry with its last-use record and, when the
// pattern can never match or is too broad, the lint warning.
type entryView struct {
	ID               string `json:"id"`
	Agent            string `json:"agent"`
	Pattern          string `json:"pattern"`
	LastUsedAt       int64  `json:"lastUsedAt"`
	LastUsedCommand  string `json:"lastUsedCommand"`
	LastResolvedPath string `json:"lastResolvedPath"`
	Lint             string `json:"lint,omitempty"`
}

func viewEntry(agent string, e approvals.Entry) entryView {
	return entryView{ID: e.ID, Agent: agent, Pattern: e.Pattern, LastUsedAt: e.LastUsedAt,
		LastUsedCommand: textsafe.Text(e.LastUsedCommand), LastResolvedPath: e.LastResolvedPath, Lint: policy.LintPattern(e.Pattern)}
}

func enumNames[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

func (s *server) handleState(w http.ResponseWriter, r *http.Request) {
	v := stateView{
		NowMs: time.Now().UnixMilli(), Editor: s.store != nil, Gateway: s.opts.Gateway != nil,
		Securities: enumNames(policy.Securities()), Asks: enumNames(policy.Asks()), Fallbacks: enumNames(policy.Fallbacks()),
		Agents: []agentView{},
	}
	if s.store == nil {
		writeJSON(w, http.StatusOK, v)
		return
	}
	f, err := s.store.Load()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	v.Hash = f.Hash()
	ids := []string{"*"}
	for id := range f.Agents {
		ids = append(ids, id)
	}
	for _, p := range s.opts.Broker.List() {
		if p.Request.AgentID != "" {
			ids = append(ids, p.Request.AgentID)
		}
	}
	slices.SortFunc(ids, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == "*":
			return -1
		case b == "*":
			return 1
		}
		return strings.Compare(a, b)
	})
	for _, id := range slices.Compact(ids) {
		v.Agents = append(v.Agents, viewAgent(f, id))
	}
	writeJSON(w, http.StatusOK, v)
}

func viewAgent(f *approvals.File, id string) agentView {
	res := f.Resolve(id)
	av := agentView{ID: id, Effective: res.Local, Sources: res.Sources,
		Skipped: append([]string{}, res.Skipped...), Warnings: append([]string{}, res.Warnings...),
		Allowlist: []entryView{}, Inherited: []entryView{}}
	if av.Sources == nil {
		av.Sources = map[string]string{}
	}
	if a := f.Agents[id]; a != nil {
		av.Exists = true
		av.Security, av.Ask, av.AskFallback = a.Security, a.Ask, a.AskFallback
		for _, e := range a.Allowlist {
			av.Allowlist = append(av.Allowlist, viewEntry(id, e))
		}
	}
	for _, re := range res.Allowlist {
		if re.Agent != id {
			av.Inherited = append(av.Inherited, viewEntry(re.Agent, re.Entry))
		}
	}
	return av
}

// update applies fn to the approvals file if it still has the hash the page
// loaded, and answers with the new hash (or 409 when it changed).
func (s *server) update(w http.ResponseWriter, baseHash, what string, fn func(*approvals.File) error) bool {
	if s.store == nil {
		writeError(w, http.StatusNotFound, "%v", errNoEditor)
		return false
	}
	if baseHash == "" {
		writeError(w, http.StatusBadRequest, "missing hash of the file this page loaded (reload the page)")
		return false
	}
	f, err := s.store.UpdateIf(baseHash, func(f *approvals.File) error {
		if err := fn(f); err != nil || s.opts.OnEdit == nil {
			return err
		}
		s.opts.OnEdit(what, baseHash) // recorded before the write
		return nil
	})
	switch {
	case errors.Is(err, approvals.ErrStale):
		writeError(w, http.StatusConflict, staleMessage)
		return false
	case errors.Is(err, errDuplicate), errors.Is(err, errNoEntry):
		writeError(w, http.StatusConflict, "%v", err)
		return false
	case err != nil:
		writeError(w, http.StatusInternalServerError, "%s: %v", what, err)
		return false
	}
	s.logf("web approver: %s", what)
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "hash": f.Hash()})
	return true
}

// allowlistRequest is the body of POST /api/allowlist.
type allowlistRequest struct {
	Hash    string `json:"hash"`
	Agent   string `json:"agent"`
	Op      string `json:"op"`      // add | edit | remove
	Pattern string `json:"pattern"` // the new pattern (add, edit) or the one to remove
	Old     string `json:"old"`     // edit: the pattern (or entry id) being replaced
}

// validPattern refuses what cannot be a pattern at all; a pattern that is
// legal but can never match is accepted and shown with its lint warning.
func validPattern(p string) error {
	switch {
	case strings.TrimSpace(p) == "":
		return errors.New("pattern is empty")
	case len(p) > 4096:
		return errors.New("pattern is longer than 4096 bytes")
	case strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("pattern %q contains a control character", p)
	}
	return nil
}

// parseAllowlist validates an allowlist edit and returns the change to
// apply inside one store update.
func parseAllowlist(req allowlistRequest) (func(*approvals.File) error, string, error) {
	if err := validAgentID(req.Agent); err != nil {
		return nil, "", err
	}
	pat := strings.TrimSpace(req.Pattern)
	switch req.Op {
	case "add":
		if err := validPattern(pat); err != nil {
			return nil, "", err
		}
		return func(f *approvals.File) error {
			if !f.AddPattern(req.Agent, pat) {
				return errDuplicate
			}
			return nil
		}, fmt.Sprintf("allowlist %s: added %q", req.Agent, pat), nil
	case "edit":
		if err := validPattern(pat); err != nil {
			return nil, "", err
		}
		if req.Old == "" {
			return nil, "", errors.New("edit: which pattern to replace is missing")
		}
		return func(f *approvals.File) error {
			if !f.RemovePattern(req.Agent, req.Old) {
				return errNoEntry
			}
			if !f.AddPattern(req.Agent, pat) {
				return errDuplicate
			}
			return nil
		}, fmt.Sprintf("allowlist %s: replaced %q with %q", req.Agent, req.Old, pat), nil
	case "remove":
		if pat == "" {
			return nil, "", errors.New("remove: which pattern is missing")
		}
		return func(f *approvals.File) error {
			if !f.RemovePattern(req.Agent, pat) {
				return errNoEntry
			}
			return nil
		}, fmt.Sprintf("allowlist %s: removed %q", req.Agent, pat), nil
	}
	return nil, "", fmt.Errorf("%w: op %q (accepted: add, edit, remove)", policy.ErrInvalidValue, req.Op)
}

func (s *server) handleAllowlist(w http.ResponseWriter, r *http.Request) {
	req, err := decodeBody[allowlistRequest](r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	fn, what, err := parseAllowlist(req)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	s.update(w, req.Hash, what, fn)
}

// agentRequest is the body of POST /api/agent: an agent's own settings,
// "" meaning "inherit". Posting it for an agent without an entry creates
// the entry.
type agentRequest struct {
	Hash        string `json:"hash"`
	Agent       string `json:"agent"`
	Security    string `json:"security"`
	Ask         string `json:"ask"`
	AskFallback string `json:"askFallback"`
}

// parseAgent validates an agent settings change: every value is empty or
// a valid mode, normalised to its canonical spelling.
func parseAgent(req agentRequest) (agentRequest, error) {
	if err := validAgentID(req.Agent); err != nil {
		return req, err
	}
	if req.Security != "" {
		v, err := policy.ParseSecurity(req.Security)
		if err != nil {
			return req, err
		}
		req.Security = string(v)
	}
	if req.Ask != "" {
		v, err := policy.ParseAsk(req.Ask)
		if err != nil {
			return req, err
		}
		req.Ask = string(v)
	}
	if req.AskFallback != "" {
		v, err := policy.ParseFallback(req.AskFallback)
		if err != nil {
			return req, err
		}
		req.AskFallback = string(v)
	}
	return req, nil
}

func (s *server) handleAgent(w http.ResponseWriter, r *http.Request) {
	req, err := decodeBody[agentRequest](r.Body)
	if err == nil {
		req, err = parseAgent(req)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	what := fmt.Sprintf("agent %s: security=%q ask=%q askFallback=%q", req.Agent, req.Security, req.Ask, req.AskFallback)
	s.update(w, req.Hash, what, func(f *approvals.File) error {
		if f.Agents == nil {
			f.Agents = map[string]*approvals.Agent{}
		}
		a := f.Agents[req.Agent]
		if a == nil {
			a = &approvals.Agent{}
			f.Agents[req.Agent] = a
		}
		a.Security, a.Ask, a.AskFallback = req.Security, req.Ask, req.AskFallback
		return nil
	})
}
