package web

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

var errNoGateway = errors.New("not connected to a gateway: node binding is managed there")

// nodesView is the payload of GET /api/nodes.
type nodesView struct {
	Nodes    []Node            `json:"nodes"`
	Bindings map[string]string `json:"bindings"`
}

func (s *server) handleNodes(w http.ResponseWriter, r *http.Request) {
	if s.opts.Gateway == nil {
		writeError(w, http.StatusNotFound, "%v", errNoGateway)
		return
	}
	nodes, err := s.opts.Gateway.Nodes(r.Context())
	if err != nil {
		writeError(w, http.StatusBadGateway, "list nodes: %v", err)
		return
	}
	b, err := s.opts.Gateway.Bindings(r.Context())
	if err != nil {
		writeError(w, http.StatusBadGateway, "read node bindings: %v", err)
		return
	}
	if nodes == nil {
		nodes = []Node{}
	}
	if b == nil {
		b = map[string]string{}
	}
	writeJSON(w, http.StatusOK, nodesView{Nodes: nodes, Bindings: b})
}

// bindingRequest is the body of POST /api/binding: bind agent ("" for the
// global tools.exec.node) to node ("" to unbind).
type bindingRequest struct {
	Agent string `json:"agent"`
	Node  string `json:"node"`
}

func parseBinding(req bindingRequest) (bindingRequest, error) {
	if req.Agent != "" {
		if err := validAgentID(req.Agent); err != nil {
			return req, err
		}
	}
	req.Node = strings.TrimSpace(req.Node)
	if len(req.Node) > 256 || strings.ContainsFunc(req.Node, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return req, fmt.Errorf("node %q: too long or contains a control character", req.Node)
	}
	return req, nil
}

func (s *server) handleBinding(w http.ResponseWriter, r *http.Request) {
	if s.opts.Gateway == nil {
		writeError(w, http.StatusNotFound, "%v", errNoGateway)
		return
	}
	req, err := decodeBody[bindingRequest](r.Body)
	if err == nil {
		req, err = parseBinding(req)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if err := s.opts.Gateway.SetExecNode(r.Context(), req.Agent, req.Node); err != nil {
		writeError(w, http.StatusBadRequest, "bind agent %q to node %q: %v", req.Agent, req.Node, err)
		return
	}
	s.logf("web approver: agent %q bound to node %q", req.Agent, req.Node)
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}
