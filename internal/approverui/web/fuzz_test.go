package web

import (
	"bytes"
	"testing"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/policy"
)

// FuzzEditRequests feeds arbitrary bodies to the parsers of every mutation
// and checks that whatever they accept is valid: agent ids pass
// validAgentID, modes are canonical, and applying an accepted allowlist
// edit to a file never panics.
func FuzzEditRequests(f *testing.F) {
	for _, s := range []string{
		`{"hash":"h","agent":"main","op":"add","pattern":"/usr/bin/rg"}`,
		`{"hash":"h","agent":"*","op":"edit","old":"/bin/a","pattern":"~/bin/**"}`,
		`{"hash":"h","agent":"a","op":"remove","pattern":"id-1"}`,
		`{"hash":"h","agent":"main","security":"FULL","ask":"on-miss","askFallback":"allowlist"}`,
		`{"agent":"","node":"n1"}`,
		`{"id":"abc","decision":"allow-always"}`,
		`{"agent":"x"} {"agent":"y"}`,
		`[1,2]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if req, err := decodeBody[allowlistRequest](bytes.NewReader(body)); err == nil {
			if fn, _, err := parseAllowlist(req); err == nil {
				if validAgentID(req.Agent) != nil {
					t.Fatalf("accepted agent id %q", req.Agent)
				}
				file := approvals.Default()
				file.AddPattern(req.Agent, "/bin/seed")
				_ = fn(file)
			}
		}
		if req, err := decodeBody[agentRequest](bytes.NewReader(body)); err == nil {
			if got, err := parseAgent(req); err == nil {
				if got.Security != "" && !policy.Security(got.Security).Valid() ||
					got.Ask != "" && !policy.Ask(got.Ask).Valid() ||
					got.AskFallback != "" && !policy.Fallback(got.AskFallback).Valid() {
					t.Fatalf("accepted non-canonical modes %+v", got)
				}
			}
		}
		if req, err := decodeBody[bindingRequest](bytes.NewReader(body)); err == nil {
			if got, err := parseBinding(req); err == nil && got.Agent != "" && validAgentID(got.Agent) != nil {
				t.Fatalf("accepted agent id %q", got.Agent)
			}
		}
	})
}
