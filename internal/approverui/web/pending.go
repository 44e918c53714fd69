package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/exechost/exechost/internal/approverui"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/textsafe"
)

// pendingView is one prompt as the page shows it: everything a human needs
// to decide, flattened so the script only renders.
type pendingView struct {
	ID           string     `json:"id"`
	AgentID      string     `json:"agentId"`
	SessionKey   string     `json:"sessionKey"`
	Host         string     `json:"host"`
	NodeID       string     `json:"nodeId"`
	Cwd          string     `json:"cwd"`
	Command      string     `json:"command"`
	Argv         []string   `json:"argv"`
	Security     string     `json:"security"`
	Ask          string     `json:"ask"`
	Reason       string     `json:"reason"`
	Paths        []pathView `json:"paths"`
	Choices      []string   `json:"choices"`
	Fallback     string     `json:"askFallback"`
	Peer         string     `json:"peer"`
	ReceivedAtMs int64      `json:"receivedAtMs"`
	ExpiresAtMs  int64      `json:"expiresAtMs"`
	// AllowAlways is what answering allow-always would add and skip
	// (approverui.AllowAlwaysLines); empty when it is not offered.
	AllowAlways []approverui.AlwaysLine `json:"allowAlways"`
	// Canonical is the parsed command as it will run (empty when it equals
	// Command), RunsAs how it runs, Starts each executable with how it
	// starts: what the approval binds.
	Canonical string   `json:"canonical"`
	RunsAs    string   `json:"runsAs"`
	Starts    []string `json:"starts"`
	// Confinement is what the kernel will let the run touch.
	Confinement string `json:"confinement"`
}

// pathView is one resolved executable and whether the allowlist already
// covers it; Known is false when the execution host did not say.
type pathView struct {
	Path        string `json:"path"`
	Known       bool   `json:"known"`
	Allowlisted bool   `json:"allowlisted"`
}

// pendingList is the payload of GET /api/pending and of every "pending"
// event: the whole queue, so a page that missed an event is never wrong
// for long. Now lets the page correct for clock skew in the countdown.
type pendingList struct {
	NowMs   int64         `json:"nowMs"`
	Pending []pendingView `json:"pending"`
}

// choices returns the decisions a prompt offers, deny always among them:
// refusing is never taken away from a human.
func choices(req prompt.Request) []string {
	out := prompt.Choices(req)
	if !slices.Contains(out, string(policy.Reject)) {
		out = append(out, string(policy.Reject))
	}
	return out
}

// viewPending flattens a prompt for the page. Every text a human reads is
// passed through textsafe.Text: the page inserts it with textContent,
// which stops HTML but not bidi overrides or zero-width characters, so
// those are escaped visibly here (the whole command, unbounded: the web
// page is where a long command can be read in full). The id is kept
// verbatim: the page sends it back.
//
// names maps node ids to display names (approverui.NodeNames): the host
// line reads "node (node build-box, 1a2b3c4d…)", not an id alone.
func viewPending(p prompt.Pending, names map[string]string) pendingView {
	r := p.Request
	t := textsafe.Text
	var argv []string
	for _, a := range r.Argv {
		argv = append(argv, t(a))
	}
	v := pendingView{
		ID: p.ID, AgentID: t(r.AgentID), SessionKey: t(r.SessionKey), Host: t(r.Host), NodeID: t(approverui.NodeLabelNamed(r.NodeID, names)),
		Cwd: t(r.Cwd), Command: t(r.Command), Argv: argv, Security: t(r.Security), Ask: t(r.Ask),
		Reason: t(r.Reason), Choices: choices(r), Fallback: t(r.Fallback), Peer: t(p.Peer),
		ReceivedAtMs: p.ReceivedAt.UnixMilli(), ExpiresAtMs: r.ExpiresAtMs,
		AllowAlways: approverui.AllowAlwaysLines(r),
		RunsAs:      t(approverui.RunsAsText(r.RunsAs)), Starts: []string{},
		Confinement: t(r.Confinement),
	}
	if c := strings.TrimSuffix(r.Canonical, "\n"); c != strings.TrimSpace(r.Command) {
		v.Canonical = t(c)
	}
	for _, x := range r.Executables {
		v.Starts = append(v.Starts, t(x))
	}
	if v.AllowAlways == nil {
		v.AllowAlways = []approverui.AlwaysLine{}
	}
	if !p.ExpiresAt.IsZero() {
		v.ExpiresAtMs = p.ExpiresAt.UnixMilli()
	}
	if v.Fallback == "" {
		v.Fallback = "askFallback"
	}
	known := len(r.Allowlisted) == len(r.ResolvedPaths)
	v.Paths = make([]pathView, len(r.ResolvedPaths))
	for i, path := range r.ResolvedPaths {
		v.Paths[i] = pathView{Path: t(path), Known: known}
		if known {
			v.Paths[i].Allowlisted = r.Allowlisted[i]
		}
	}
	return v
}

// decidedBy names who answered, for the execution host's audit log.
func (s *server) decidedBy() string {
	if s.opts.DecidedBy != "" {
		return s.opts.DecidedBy
	}
	return "web"
}

func (s *server) pendingNow() pendingList {
	list := s.opts.Broker.List() // oldest first
	out := pendingList{NowMs: time.Now().UnixMilli(), Pending: make([]pendingView, 0, len(list))}
	var names map[string]string
	for _, p := range list {
		if names == nil && p.Request.NodeID != "" {
			// Read only when a prompt names a node: pairings change
			// while the page is open.
			names = approverui.NodeNames(s.opts.StateDir)
		}
		out.Pending = append(out.Pending, viewPending(p, names))
	}
	return out
}

func (s *server) handlePending(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.pendingNow())
}

// changeView is the payload of a "change" event: what just happened to one
// prompt, for the page's activity log.
type changeView struct {
	Kind     string `json:"kind"`
	ID       string `json:"id"`
	Command  string `json:"command"`
	AgentID  string `json:"agentId"`
	Decision string `json:"decision,omitempty"`
	By       string `json:"by,omitempty"`
}

// heartbeat keeps an idle event stream from being cut by proxies and lets
// the server notice a closed page.
const heartbeat = 20 * time.Second

// handleEvents streams Server-Sent Events: "pending" with the whole queue
// (first at once, then after every change) and "change" per change.
func (s *server) handleEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	ch, cancel := s.opts.Broker.Subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(event string, v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return false
		}
		fl.Flush()
		return true
	}
	if !send("pending", s.pendingNow()) {
		return
	}
	t := time.NewTicker(heartbeat)
	defer t.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
			fl.Flush()
		case c, ok := <-ch:
			if !ok {
				return
			}
			cv := changeView{Kind: c.Kind, ID: c.Pending.ID, Command: textsafe.Text(c.Pending.Request.Command),
				AgentID: textsafe.Text(c.Pending.Request.AgentID), Decision: string(c.Decision), By: textsafe.Text(c.By)}
			if !send("change", cv) || !send("pending", s.pendingNow()) {
				return
			}
		}
	}
}

// decideRequest is the body of POST /api/decide.
type decideRequest struct {
	ID       string `json:"id"`
	Decision string `json:"decision"`
}

// decideStatus maps a Broker.Resolve error to an HTTP status: a prompt that
// is gone (answered elsewhere, expired into askFallback, never existed) is
// 404, a decision the prompt does not offer or an ambiguous id is 400.
func decideStatus(err error) int {
	switch {
	case errors.Is(err, prompt.ErrUnknownID), errors.Is(err, prompt.ErrAnswered), errors.Is(err, prompt.ErrExpired):
		return http.StatusNotFound
	case errors.Is(err, prompt.ErrNotOffered), errors.Is(err, prompt.ErrAmbiguousID), errors.Is(err, policy.ErrInvalidValue):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

func (s *server) handleDecide(w http.ResponseWriter, r *http.Request) {
	body, err := decodeBody[decideRequest](r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	a, err := policy.ParseApproval(body.Decision)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if err := s.opts.Broker.Resolve(body.ID, a, s.decidedBy()); err != nil {
		if errors.Is(err, prompt.ErrExpired) {
			s.logf("web approver: late decision %s for %s refused: %v", a, textsafe.Line(body.ID), err)
		}
		writeError(w, decideStatus(err), "%v", err)
		return
	}
	s.logf("web approver: prompt %s answered %s by %s", body.ID, a, s.decidedBy())
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}
