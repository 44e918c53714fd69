package metrics

import (
	"strings"
	"testing"
)

// TestObserveDecision: gateway decisions are counted by their closed-set
// labels, and a value that is not a short plain token (free text that
// leaked into a label) becomes "other" instead of a new series.
func TestObserveDecision(t *testing.T) {
	m := New()
	m.ObserveDecision("exec", "denied", "binding", "node")
	m.ObserveDecision("exec", "denied", "binding", "node")
	m.ObserveDecision("node.approve", "decision", "operator", "")
	m.ObserveDecision("exec", "denied", `agent "x" is bound to node B`, "node")
	m.ObserveDecision("exec", "denied", strings.Repeat("a", MaxLabelValue+1), "node")
	body := scrape(t, m)
	for _, want := range []string{
		`exechost_gateway_decisions_total{action="exec",event="denied",host="node",reason="binding"} 2`,
		`exechost_gateway_decisions_total{action="node.approve",event="decision",host="",reason="operator"} 1`,
		`exechost_gateway_decisions_total{action="exec",event="denied",host="node",reason="other"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %s in:\n%s", want, body)
		}
	}
	var nilM *Metrics
	nilM.ObserveDecision("exec", "denied", "binding", "node") // records nothing, does not panic
}
