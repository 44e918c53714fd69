// Package trace is exechost's OpenTelemetry tracing: one span per exec on
// the gateway, continuing the trace of the agent that asked (W3C trace
// context from the exec params' traceparent/tracestate, or MCP _meta),
// exported over OTLP/HTTP when configured and off by default.
//
// The exporter is our own (otlpjson.go): OTLP/HTTP with the JSON
// encoding, POSTed to the collector's /v1/traces. The SDK's OTLP
// exporters would link protobuf and grpc into the binary, whose package
// inits every exechost start pays, traced or not.
//
// The contract:
//   - Off unless an endpoint is configured (telemetry.otlp.endpoint in
//     exechost.json, or the standard OTEL_EXPORTER_OTLP_ENDPOINT /
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT variables). A nil *Tracer is off:
//     every method is a no-op, and nothing is allocated per exec.
//   - A span carries identifiers, digests, exit codes and timings, never
//     output, environment values or the command text (which may hold a
//     secret): the command is named by its SHA-256, as in receipts.
//   - A malformed traceparent starts a new trace; it is never an error
//     for the exec.
//   - Exports are batched off the exec's path, each bounded by
//     OTEL_EXPORTER_OTLP_TIMEOUT (10 s by default, at most a minute); a
//     failed export goes to the OTel error handler and never fails a run.
//     OTEL_EXPORTER_OTLP_HEADERS (and the TRACES_ variants) are sent.
package trace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of exechost's spans.
const ScopeName = "github.com/exechost/exechost"

// SpanExec is the name of the span of one exec.
const SpanExec = "exechost.exec"

// Attribute keys of our own (semantic conventions have none for these).
const (
	AttrRunID         = attribute.Key("exechost.run_id")
	AttrHost          = attribute.Key("exechost.host")
	AttrNodeID        = attribute.Key("exechost.node_id")
	AttrAgentID       = attribute.Key("exechost.agent_id")
	AttrCommandSHA256 = attribute.Key("exechost.command.sha256")
	AttrStatus        = attribute.Key("exechost.status")
	AttrTimedOut      = attribute.Key("exechost.timed_out")
	AttrOutputBytes   = attribute.Key("exechost.output.bytes")
	AttrDecision      = attribute.Key("exechost.decision")
)

// Span event names, in the order an exec passes them.
const (
	EventReceived     = "exechost.received"
	EventPlaced       = "exechost.placed"
	EventApprovalWait = "exechost.approval.wait"
	EventApprovalDone = "exechost.approval.answered"
	EventHostRun      = "exechost.host.run"
	EventHostFinished = "exechost.host.finished"
)

// Options configure a Tracer.
type Options struct {
	// Endpoint is the OTLP/HTTP collector's base URL
	// (http://collector:4318; spans go to its /v1/traces, as with
	// OTEL_EXPORTER_OTLP_ENDPOINT); empty leaves it to the
	// OTEL_EXPORTER_OTLP_* variables.
	Endpoint string
	// Version is exechost's version, for service.version.
	Version string
	// Exporter replaces the OTLP exporter (tests: tracetest's in-memory
	// exporter). Spans are then exported synchronously.
	Exporter sdktrace.SpanExporter
	// Getenv reads the environment (os.Getenv when nil).
	Getenv func(string) string
}

// Tracer is the process's tracer provider. A nil *Tracer is off.
type Tracer struct {
	tp *sdktrace.TracerProvider
	tr oteltrace.Tracer
}

// Enabled reports whether opts turn tracing on: an endpoint, an exporter
// or one of the standard endpoint variables.
func Enabled(opts Options) bool {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	return opts.Exporter != nil || opts.Endpoint != "" ||
		getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// New returns a Tracer, or nil (off) when opts do not enable tracing. A
// malformed endpoint is an error: a configured exporter that silently
// exports nothing would be worse than none.
func New(ctx context.Context, opts Options) (*Tracer, error) {
	if !Enabled(opts) {
		return nil, nil
	}
	exp := opts.Exporter
	var sp sdktrace.TracerProviderOption
	if exp == nil {
		getenv := opts.Getenv
		if getenv == nil {
			getenv = os.Getenv
		}
		cfg, err := exporterConfigFrom(opts.Endpoint, getenv)
		if err != nil {
			return nil, err
		}
		// Batched: an exec never waits on the collector.
		sp = sdktrace.WithBatcher(newJSONExporter(cfg), sdktrace.WithExportTimeout(cfg.Timeout))
	} else {
		sp = sdktrace.WithSyncer(exp)
	}
	res := resource.NewSchemaless(semconv.ServiceName("exechost"), semconv.ServiceVersion(opts.Version))
	tp := sdktrace.NewTracerProvider(sp, sdktrace.WithResource(res))
	return &Tracer{tp: tp, tr: tp.Tracer(ScopeName)}, nil
}

// Shutdown flushes pending spans, bounded by ctx.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	if err := t.tp.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("trace shutdown: %w", err)
	}
	return nil
}

var propagator = propagation.TraceContext{}

// Parent returns ctx carrying the remote span context of a W3C
// traceparent (and tracestate); a missing or malformed one leaves ctx as
// it is, so the exec starts a new trace.
func Parent(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent, "tracestate": tracestate})
}

// Exec is the start of one exec's span.
type Exec struct {
	RunID, Host, AgentID, CommandSHA256 string
	Traceparent, Tracestate             string
	Start                               time.Time
}

// StartExec starts the exec's span as a child of the agent's trace
// context, when it sent one. The span is in the returned context, so
// Event can mark its phases from deeper down (the host engine's approval
// wait). With t nil it returns ctx and a nil span.
func (t *Tracer) StartExec(ctx context.Context, x Exec) (context.Context, oteltrace.Span) {
	if t == nil {
		return ctx, nil
	}
	ctx = Parent(ctx, x.Traceparent, x.Tracestate)
	opts := []oteltrace.SpanStartOption{oteltrace.WithSpanKind(oteltrace.SpanKindServer),
		oteltrace.WithAttributes(AttrHost.String(x.Host), AttrAgentID.String(x.AgentID), AttrCommandSHA256.String(x.CommandSHA256))}
	if !x.Start.IsZero() {
		opts = append(opts, oteltrace.WithTimestamp(x.Start))
	}
	ctx, span := t.tr.Start(ctx, SpanExec, opts...)
	span.AddEvent(EventReceived)
	return ctx, span
}

// Event adds a phase event to the exec span in ctx, if any.
func Event(ctx context.Context, name string, attrs ...attribute.KeyValue) {
	span := oteltrace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent(name, oteltrace.WithAttributes(attrs...))
}

// Result is how an exec ended, for its span.
type Result struct {
	RunID, NodeID, Status string
	ExitCode              *int
	TimedOut              bool
	OutputBytes           int
	// ErrorType is the error's code (DENIED, UNAVAILABLE …) when the exec
	// failed or was refused.
	ErrorType string
}

// EndExec sets the result's attributes and ends span (nil: no-op).
func EndExec(span oteltrace.Span, r Result) {
	if span == nil {
		return
	}
	attrs := []attribute.KeyValue{AttrRunID.String(r.RunID), AttrStatus.String(r.Status)}
	if r.NodeID != "" {
		attrs = append(attrs, AttrNodeID.String(r.NodeID))
	}
	if r.ExitCode != nil {
		attrs = append(attrs, semconv.ProcessExitCode(*r.ExitCode), AttrTimedOut.Bool(r.TimedOut), AttrOutputBytes.Int(r.OutputBytes))
	}
	if r.ErrorType != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(r.ErrorType))
		span.SetStatus(codes.Error, r.ErrorType)
	}
	span.SetAttributes(attrs...)
	span.End()
}
