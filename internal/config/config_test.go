package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/policy"
)

func TestParse(t *testing.T) {
	c, err := Parse("exechost.json", []byte(`{
		// global defaults
		"tools": {"exec": {"host": "node", "security": "allowlist", "ask": "always", "node": "build-box"}},
		"agents": {"list": [
			{"id": "ops", "tools": {"exec": {"host": "gateway", "security": "full"}}},
			{"id": "plain"}, // trailing commas are fine
		]},
		"gateway": {"listen": "127.0.0.1:0", "allowedHosts": ["gw.example"], "allowedOrigins": ["https://ops.example"],
			"limits": {"execsPerAgent": 3}},
	}`))
	if err != nil {
		t.Fatal(err)
	}
	agent, global := c.Layers("ops")
	if diff := cmp.Diff(policy.Settings{Host: "gateway", Security: "full"}, agent); diff != "" {
		t.Errorf("agent layer (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(policy.Settings{Host: "node", Security: "allowlist", Ask: "always", Node: "build-box"}, global); diff != "" {
		t.Errorf("global layer (-want +got):\n%s", diff)
	}
	if got := c.Binding("ops"); got != "build-box" {
		t.Errorf("Binding(ops) = %q, want the global binding", got)
	}
	if diff := cmp.Diff([]string{"gw.example"}, c.Gateway.AllowedHosts); diff != "" {
		t.Errorf("allowedHosts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"https://ops.example"}, c.Gateway.AllowedOrigins); diff != "" {
		t.Errorf("allowedOrigins (-want +got):\n%s", diff)
	}
	if c.Gateway.Listen != "127.0.0.1:0" {
		t.Errorf("listen = %q", c.Gateway.Listen)
	}
	if c.Sandbox.Backend == "" {
		t.Error("sandbox defaults not applied")
	}
	if got, want := c.Gateway.Limits.WithDefaults(), (Limits{ExecsPerAgent: 3, Execs: DefaultExecs}); got != want {
		t.Errorf("limits = %+v, want %+v (the unset one defaulted)", got, want)
	}
	if got := Default().Gateway.Limits.WithDefaults(); got.ExecsPerAgent != DefaultExecsPerAgent || got.Execs != DefaultExecs {
		t.Errorf("default limits = %+v", got)
	}
}

func TestParseErrorsNameThePath(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"unknown top", `{"tool": {}}`, `tool: unknown key`},
		{"unknown nested", `{"tools": {"exec": {"hots": "node"}}}`, `tools.exec.hots: unknown key`},
		{"unknown in list", `{"agents": {"list": [{"id": "a"}, {"id": "b", "tools": {"exec": {"sec": "full"}}}]}}`, `agents.list[1].tools.exec.sec: unknown key`},
		{"bad host", `{"tools": {"exec": {"host": "gatway"}}}`, `tools.exec.host: invalid value: host "gatway" (accepted: sandbox, gateway, node)`},
		{"bad agent security", `{"agents": {"list": [{"id": "a", "tools": {"exec": {"security": "yolo"}}}]}}`, `agents.list[0].tools.exec.security: invalid value`},
		{"bad ask", `{"tools": {"exec": {"ask": "sometimes"}}}`, `tools.exec.ask: invalid value`},
		{"missing id", `{"agents": {"list": [{}]}}`, `agents.list[0].id: missing`},
		{"duplicate id", `{"agents": {"list": [{"id": "a"}, {"id": "a"}]}}`, `agents.list[1].id: duplicate`},
		{"wrong type", `{"tools": {"exec": {"host": 3}}}`, `tools.exec.host`},
		{"unknown sandbox key", `{"sandbox": {"docker": {"imag": "x"}}}`, `sandbox.docker.imag: unknown key`},
		{"half tls", `{"gateway": {"tls": {"cert": "c.pem"}}}`, `gateway.tls: cert and key`},
		{"bad host pattern", `{"gateway": {"allowedHosts": ["gw.example", "[bad"]}}`, `gateway.allowedHosts[1]: "[bad" is not a host or origin pattern`},
		{"empty origin", `{"gateway": {"allowedOrigins": [" "]}}`, `gateway.allowedOrigins[0]`},
		{"unknown gateway key", `{"gateway": {"allowedHost": ["gw.example"]}}`, `gateway.allowedHost: unknown key`},
		{"negative limit", `{"gateway": {"limits": {"execs": -1}}}`, `gateway.limits.execs: invalid value: -1`},
		{"unknown limit", `{"gateway": {"limits": {"exec": 5}}}`, `gateway.limits.exec: unknown key`},
		{"syntax", `{"tools": `, `exechost.json`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("exechost.json", []byte(tt.in))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse(%s) = %v, want ErrInvalid", tt.in, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(%s) = %q, want it to contain %q", tt.in, err, tt.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "exechost.json")
	if _, err := Load(path, false); err == nil {
		t.Error("Load of a missing file without missingOK succeeded")
	}
	c, err := Load(path, true)
	if err != nil {
		t.Fatalf("Load missing with missingOK: %v", err)
	}
	if c.Gateway.Listen != DefaultListen {
		t.Errorf("default listen = %q", c.Gateway.Listen)
	}
	if err := os.WriteFile(path, []byte(`{"tools":{"exec":{"host":"gateway"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = Load(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != path || c.Tools.Exec.Host != "gateway" {
		t.Errorf("Load = %+v", c)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"tools": {"exec": {"host": "node"}}, "agents": {"list": [{"id": "a"}]}}`))
	f.Add([]byte(`// c
{"gateway": {"listen": "x", "tls": {"cert": "a", "key": "b"}},}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("f", data)
		if err != nil {
			return
		}
		// Whatever parses only holds valid enum values.
		for _, e := range append([]Exec{c.Tools.Exec}, agentsExec(c)...) {
			if e.Host != "" && !policy.Host(strings.ToLower(e.Host)).Valid() {
				t.Fatalf("accepted host %q", e.Host)
			}
		}
	})
}

func agentsExec(c *Config) []Exec {
	var out []Exec
	for _, a := range c.Agents.List {
		out = append(out, a.Tools.Exec)
	}
	return out
}

// TestTelemetryEndpoint: telemetry.otlp.endpoint must be an http(s) URL;
// the default is off.
func TestTelemetryEndpoint(t *testing.T) {
	c, err := Parse("t", []byte(`{"telemetry": {"otlp": {"endpoint": "http://localhost:4318"}}}`))
	if err != nil || c.Telemetry.OTLP.Endpoint != "http://localhost:4318" {
		t.Fatalf("valid endpoint: %+v, %v", c, err)
	}
	for _, bad := range []string{`"localhost:4318"`, `"ftp://x"`, `"http://"`} {
		if _, err := Parse("t", []byte(`{"telemetry": {"otlp": {"endpoint": `+bad+`}}}`)); err == nil || !strings.Contains(err.Error(), "telemetry.otlp.endpoint") {
			t.Errorf("endpoint %s: %v", bad, err)
		}
	}
	if _, err := Parse("t", []byte(`{"telemetry": {"otlp": {"endpoit": "http://x"}}}`)); err == nil {
		t.Error("a misspelt telemetry key was accepted")
	}
	if Default().Telemetry.OTLP.Endpoint != "" {
		t.Error("tracing on by default")
	}
}
