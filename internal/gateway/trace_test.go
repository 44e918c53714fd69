package gateway_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/gateway"
	"github.com/exechost/exechost/internal/trace"
)

// TestExecSpanContinuesTheAgentsTrace: an exec whose params carry the
// agent's traceparent produces one span in the agent's trace, child of
// the agent's span, with the run's attributes, the phases as events, and
// neither the command text nor its output.
func TestExecSpanContinuesTheAgentsTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr, err := trace.New(context.Background(), trace.Options{Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, fullConfig, func(o *gateway.Options) { o.Tracer = tr })
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	agent := e.client(t, bridge.RoleAgent)
	secret := "TOKEN=s3cr3t-value"
	res, err := call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{
		Command: "echo " + secret + "; exit 4", Host: "gateway", AgentID: "main", SessionKey: "s",
		Traceparent: "00-" + traceID + "-" + parentID + "-01",
	})
	if err != nil || res.ExitCode != 4 {
		t.Fatalf("exec: %+v, %v", res, err)
	}
	// A second exec without trace context starts its own trace.
	if _, err := call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{Command: "true", Host: "gateway", AgentID: "main", SessionKey: "s"}); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want one per exec", len(spans))
	}
	s := spans[0]
	if s.Name != trace.SpanExec || s.SpanContext.TraceID().String() != traceID || s.Parent.SpanID().String() != parentID || !s.Parent.IsRemote() {
		t.Errorf("span %s trace %s parent %s, want %s in trace %s under %s", s.Name, s.SpanContext.TraceID(), s.Parent.SpanID(), trace.SpanExec, traceID, parentID)
	}
	attrs := map[string]string{}
	for _, a := range s.Attributes {
		attrs[string(a.Key)] = a.Value.String()
	}
	for k, want := range map[string]string{"exechost.run_id": res.RunID, "process.exit.code": "4", "exechost.agent_id": "main", "exechost.status": "completed"} {
		if attrs[k] != want {
			t.Errorf("attribute %s = %q, want %q (all: %v)", k, attrs[k], want, attrs)
		}
	}
	var events []string
	for _, ev := range s.Events {
		events = append(events, ev.Name)
	}
	if got := strings.Join(events, ","); got != "exechost.received,exechost.host.run,exechost.host.finished" {
		t.Errorf("events %s", got)
	}
	var all strings.Builder
	for _, a := range s.Attributes {
		all.WriteString(a.Value.String())
	}
	if strings.Contains(all.String(), "s3cr3t") {
		t.Errorf("the span carries the command or its output: %v", attrs)
	}
	if spans[1].SpanContext.TraceID().String() == traceID || spans[1].Parent.IsValid() {
		t.Errorf("an exec without trace context joined another trace: parent %v", spans[1].Parent)
	}
}
