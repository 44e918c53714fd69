package trace

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Our own OTLP/HTTP exporter with the JSON encoding. The SDK's exporters
// (otlptracehttp, otlptracegrpc) link protobuf and grpc into the one
// exechost binary, whose package inits cost every start, traced or not;
// OTLP/HTTP+JSON is part of the OTLP specification and every collector
// accepts it on /v1/traces.

const (
	// DefaultTimeout bounds one export when OTEL_EXPORTER_OTLP_TIMEOUT
	// does not say (the OTLP default).
	DefaultTimeout = 10 * time.Second
	// MaxTimeout caps a configured timeout: a stuck collector must not
	// hold a batch (and the shutdown flush) for long.
	MaxTimeout = time.Minute
	// maxErrorBody is how much of a refusal's body an error quotes.
	maxErrorBody = 512
)

// exporterConfig is where and how spans are posted.
type exporterConfig struct {
	URL     string
	Headers map[string]string
	Timeout time.Duration
}

// exporterConfigFrom resolves the endpoint, headers and timeout as the
// SDK's OTLP/HTTP exporter did: the configured endpoint (a base URL, to
// which /v1/traces is appended) first, then
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as is), then
// OTEL_EXPORTER_OTLP_ENDPOINT (a base URL); headers from
// OTEL_EXPORTER_OTLP_HEADERS overridden per key by
// OTEL_EXPORTER_OTLP_TRACES_HEADERS; likewise the timeouts, in ms.
func exporterConfigFrom(endpoint string, getenv func(string) string) (exporterConfig, error) {
	var c exporterConfig
	base, what := endpoint, "telemetry.otlp.endpoint"
	switch {
	case endpoint != "":
	case getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "":
		base, what = "", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
		c.URL = getenv(what)
	default:
		base, what = getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), "OTEL_EXPORTER_OTLP_ENDPOINT"
	}
	if base != "" {
		u, err := url.Parse(base)
		if err == nil {
			// The base URL names the collector: traces go to /v1/traces.
			u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
			c.URL = u.String()
		}
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v := endpoint
		if v == "" {
			v = getenv(what)
		}
		return c, fmt.Errorf("%s %q: want an http:// or https:// URL (OTLP/HTTP, e.g. http://localhost:4318)", what, v)
	}
	c.Headers = map[string]string{}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		if err := parseHeaders(getenv(k), c.Headers); err != nil {
			return c, fmt.Errorf("%s: %w", k, err)
		}
	}
	c.Timeout = DefaultTimeout
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"} {
		v := getenv(k)
		if v == "" {
			continue
		}
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			return c, fmt.Errorf("%s %q: want a positive number of milliseconds", k, v)
		}
		c.Timeout = min(time.Duration(ms)*time.Millisecond, MaxTimeout)
	}
	return c, nil
}

// parseHeaders reads the W3C-baggage-like list "k1=v1,k2=v2" of
// OTEL_EXPORTER_OTLP_HEADERS, values percent-encoded.
func parseHeaders(s string, into map[string]string) error {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fmt.Errorf("%q is not key=value (want k1=v1,k2=v2)", kv)
		}
		dv, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("header %q: %w", k, err)
		}
		into[http.CanonicalHeaderKey(k)] = dv
	}
	return nil
}

// jsonExporter is a sdktrace.SpanExporter posting OTLP/HTTP JSON.
type jsonExporter struct {
	cfg    exporterConfig
	client *http.Client

	mu       sync.Mutex
	shutdown bool
}

var _ sdktrace.SpanExporter = (*jsonExporter)(nil)

func newJSONExporter(cfg exporterConfig) *jsonExporter {
	return &jsonExporter{cfg: cfg, client: &http.Client{Timeout: cfg.Timeout}}
}

// ExportSpans posts spans in one request. An error is returned to the
// span processor, which reports it to the OTel error handler: a failed
// export never fails the exec it describes.
func (e *jsonExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	done := e.shutdown
	e.mu.Unlock()
	if done || len(spans) == 0 {
		return nil
	}
	body, err := json.Marshal(encodeSpans(spans))
	if err != nil {
		return fmt.Errorf("otlp: encode: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("otlp: %w", err)
	}
	for k, v := range e.cfg.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("otlp: post %d spans: %w (is the collector listening on %s?)", len(spans), err, e.cfg.URL)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("otlp: collector %s refused %d spans: %s: %s (does it accept OTLP/HTTP JSON?)", e.cfg.URL, len(spans), resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// Shutdown stops further exports; pending ones are the processor's.
func (e *jsonExporter) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	e.shutdown = true
	e.mu.Unlock()
	e.client.CloseIdleConnections()
	return ctx.Err()
}

// The OTLP JSON mapping (opentelemetry-proto, ExportTraceServiceRequest):
// lowerCamelCase field names, trace and span ids as hex, 64-bit integers
// as decimal strings, enums as integers.
type (
	jRequest struct {
		ResourceSpans []jResourceSpans `json:"resourceSpans"`
	}
	jResourceSpans struct {
		Resource   jResource     `json:"resource"`
		ScopeSpans []jScopeSpans `json:"scopeSpans"`
		SchemaURL  string        `json:"schemaUrl,omitempty"`
	}
	jResource struct {
		Attributes []jKeyValue `json:"attributes,omitempty"`
	}
	jScopeSpans struct {
		Scope     jScope  `json:"scope"`
		Spans     []jSpan `json:"spans"`
		SchemaURL string  `json:"schemaUrl,omitempty"`
	}
	jScope struct {
		Name       string      `json:"name,omitempty"`
		Version    string      `json:"version,omitempty"`
		Attributes []jKeyValue `json:"attributes,omitempty"`
	}
	jSpan struct {
		TraceID                string      `json:"traceId"`
		SpanID                 string      `json:"spanId"`
		TraceState             string      `json:"traceState,omitempty"`
		ParentSpanID           string      `json:"parentSpanId,omitempty"`
		Flags                  uint32      `json:"flags,omitempty"`
		Name                   string      `json:"name"`
		Kind                   int         `json:"kind"`
		StartTimeUnixNano      string      `json:"startTimeUnixNano"`
		EndTimeUnixNano        string      `json:"endTimeUnixNano"`
		Attributes             []jKeyValue `json:"attributes,omitempty"`
		DroppedAttributesCount int         `json:"droppedAttributesCount,omitempty"`
		Events                 []jEvent    `json:"events,omitempty"`
		DroppedEventsCount     int         `json:"droppedEventsCount,omitempty"`
		Links                  []jLink     `json:"links,omitempty"`
		DroppedLinksCount      int         `json:"droppedLinksCount,omitempty"`
		Status                 *jStatus    `json:"status,omitempty"`
	}
	jEvent struct {
		TimeUnixNano           string      `json:"timeUnixNano"`
		Name                   string      `json:"name"`
		Attributes             []jKeyValue `json:"attributes,omitempty"`
		DroppedAttributesCount int         `json:"droppedAttributesCount,omitempty"`
	}
	jLink struct {
		TraceID                string      `json:"traceId"`
		SpanID                 string      `json:"spanId"`
		TraceState             string      `json:"traceState,omitempty"`
		Attributes             []jKeyValue `json:"attributes,omitempty"`
		DroppedAttributesCount int         `json:"droppedAttributesCount,omitempty"`
		Flags                  uint32      `json:"flags,omitempty"`
	}
	jStatus struct {
		Message string `json:"message,omitempty"`
		Code    int    `json:"code,omitempty"`
	}
	jKeyValue struct {
		Key   string    `json:"key"`
		Value jAnyValue `json:"value"`
	}
	jAnyValue struct {
		StringValue *string      `json:"stringValue,omitempty"`
		BoolValue   *bool        `json:"boolValue,omitempty"`
		IntValue    *string      `json:"intValue,omitempty"`
		DoubleValue *jDouble     `json:"doubleValue,omitempty"`
		ArrayValue  *jArrayValue `json:"arrayValue,omitempty"`
		KvlistValue *jKvList     `json:"kvlistValue,omitempty"`
		BytesValue  []byte       `json:"bytesValue,omitempty"` // base64, as the mapping wants
	}
	jKvList struct {
		Values []jKeyValue `json:"values"`
	}
	jArrayValue struct {
		Values []jAnyValue `json:"values"`
	}
	// jDouble is a double in the proto JSON mapping: NaN and the
	// infinities as strings, which encoding/json refuses to write.
	jDouble float64
)

func (d jDouble) MarshalJSON() ([]byte, error) {
	f := float64(d)
	switch {
	case math.IsNaN(f):
		return []byte(`"NaN"`), nil
	case math.IsInf(f, 1):
		return []byte(`"Infinity"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-Infinity"`), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// SDK span flags carry the W3C flags in the low byte; OTLP also wants to
// know the parent's remoteness (SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK,
// SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK).
const (
	flagHasIsRemote = 0x100
	flagIsRemote    = 0x200
)

// encodeSpans groups spans by resource and scope, in first-seen order.
func encodeSpans(spans []sdktrace.ReadOnlySpan) jRequest {
	var req jRequest
	type scopeKey struct {
		res          int
		name, ver, s string
	}
	resIdx := map[attribute.Distinct]int{}
	scopeIdx := map[scopeKey]int{}
	for _, s := range spans {
		var rd attribute.Distinct
		var resAttrs []attribute.KeyValue
		schema := ""
		if r := s.Resource(); r != nil {
			rd, resAttrs, schema = r.Equivalent(), r.Attributes(), r.SchemaURL()
		}
		ri, ok := resIdx[rd]
		if !ok {
			ri = len(req.ResourceSpans)
			resIdx[rd] = ri
			req.ResourceSpans = append(req.ResourceSpans, jResourceSpans{Resource: jResource{Attributes: encodeAttrs(resAttrs)}, SchemaURL: schema})
		}
		is := s.InstrumentationScope()
		sk := scopeKey{ri, is.Name, is.Version, is.SchemaURL}
		si, ok := scopeIdx[sk]
		rs := &req.ResourceSpans[ri]
		if !ok {
			si = len(rs.ScopeSpans)
			scopeIdx[sk] = si
			scopeAttrs := is.Attributes.ToSlice()
			rs.ScopeSpans = append(rs.ScopeSpans, jScopeSpans{Scope: jScope{Name: is.Name, Version: is.Version, Attributes: encodeAttrs(scopeAttrs)}, SchemaURL: is.SchemaURL})
		}
		rs.ScopeSpans[si].Spans = append(rs.ScopeSpans[si].Spans, encodeSpan(s))
	}
	return req
}

func encodeSpan(s sdktrace.ReadOnlySpan) jSpan {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	js := jSpan{
		TraceID:                hex.EncodeToString(tid[:]),
		SpanID:                 hex.EncodeToString(sid[:]),
		TraceState:             sc.TraceState().String(),
		Flags:                  uint32(sc.TraceFlags()) | flagHasIsRemote,
		Name:                   s.Name(),
		Kind:                   int(s.SpanKind()), // oteltrace.SpanKind's values are OTLP's
		StartTimeUnixNano:      unixNano(s.StartTime()),
		EndTimeUnixNano:        unixNano(s.EndTime()),
		Attributes:             encodeAttrs(s.Attributes()),
		DroppedAttributesCount: s.DroppedAttributes(),
		DroppedEventsCount:     s.DroppedEvents(),
		DroppedLinksCount:      s.DroppedLinks(),
	}
	if p := s.Parent(); p.SpanID().IsValid() {
		psid := p.SpanID()
		js.ParentSpanID = hex.EncodeToString(psid[:])
		if p.IsRemote() {
			js.Flags |= flagIsRemote
		}
	}
	for _, ev := range s.Events() {
		js.Events = append(js.Events, jEvent{TimeUnixNano: unixNano(ev.Time), Name: ev.Name,
			Attributes: encodeAttrs(ev.Attributes), DroppedAttributesCount: ev.DroppedAttributeCount})
	}
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		js.Links = append(js.Links, jLink{TraceID: hex.EncodeToString(ltid[:]), SpanID: hex.EncodeToString(lsid[:]),
			TraceState: l.SpanContext.TraceState().String(), Attributes: encodeAttrs(l.Attributes),
			DroppedAttributesCount: l.DroppedAttributeCount, Flags: uint32(l.SpanContext.TraceFlags()) | flagHasIsRemote})
	}
	// OTel's codes (Unset 0, Error 1, Ok 2) are not OTLP's (Unset 0, Ok 1,
	// Error 2).
	switch st := s.Status(); st.Code {
	case codes.Error:
		js.Status = &jStatus{Code: 2, Message: st.Description}
	case codes.Ok:
		js.Status = &jStatus{Code: 1}
	}
	return js
}

func unixNano(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

func encodeAttrs(kvs []attribute.KeyValue) []jKeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]jKeyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, jKeyValue{Key: string(kv.Key), Value: encodeValue(kv.Value)})
	}
	return out
}

func encodeValue(v attribute.Value) jAnyValue {
	str := func(s string) jAnyValue { return jAnyValue{StringValue: &s} }
	boo := func(b bool) jAnyValue { return jAnyValue{BoolValue: &b} }
	num := func(i int64) jAnyValue { s := strconv.FormatInt(i, 10); return jAnyValue{IntValue: &s} }
	dbl := func(f float64) jAnyValue { d := jDouble(f); return jAnyValue{DoubleValue: &d} }
	arr := func(n int, at func(int) jAnyValue) jAnyValue {
		a := &jArrayValue{Values: make([]jAnyValue, n)}
		for i := range n {
			a.Values[i] = at(i)
		}
		return jAnyValue{ArrayValue: a}
	}
	switch v.Type() {
	case attribute.BOOL:
		return boo(v.AsBool())
	case attribute.INT64:
		return num(v.AsInt64())
	case attribute.FLOAT64:
		return dbl(v.AsFloat64())
	case attribute.STRING:
		return str(v.AsString())
	case attribute.BOOLSLICE:
		s := v.AsBoolSlice()
		return arr(len(s), func(i int) jAnyValue { return boo(s[i]) })
	case attribute.INT64SLICE:
		s := v.AsInt64Slice()
		return arr(len(s), func(i int) jAnyValue { return num(s[i]) })
	case attribute.FLOAT64SLICE:
		s := v.AsFloat64Slice()
		return arr(len(s), func(i int) jAnyValue { return dbl(s[i]) })
	case attribute.STRINGSLICE:
		s := v.AsStringSlice()
		return arr(len(s), func(i int) jAnyValue { return str(s[i]) })
	case attribute.SLICE:
		s := v.AsSlice()
		return arr(len(s), func(i int) jAnyValue { return encodeValue(s[i]) })
	case attribute.MAP:
		return jAnyValue{KvlistValue: &jKvList{Values: encodeAttrs(v.AsMap())}}
	case attribute.BYTESLICE:
		return jAnyValue{BytesValue: v.AsByteSlice()}
	case attribute.EMPTY:
		return jAnyValue{}
	}
	// A type this exporter does not know: its text, not a silent drop.
	return str(v.String())
}
