package approvals

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		line, col int
		msg       string // substring of the error
		sentinel  error
	}{
		{name: "empty file", in: "", line: 1, col: 1, msg: "unexpected end"},
		{name: "truncated", in: `{"version": 1`, line: 1, col: 14, msg: "unexpected end"},
		{name: "trailing comma", in: `{"version": 1,}`, line: 1, col: 15, msg: "invalid character '}'"},
		{name: "comma in object on line 3", in: "{\n  \"version\": 1,\n  \"agents\": {,}\n}", line: 3, col: 14, msg: "invalid character ','"},
		{name: "garbage after value", in: "{}\nx", line: 2, col: 1, msg: "after top-level value"},
		{name: "top-level array", in: "\n  []", line: 2, col: 3, msg: "top level: expected an object, found an array"},
		{name: "allowlist is a string", in: "{\n  \"agents\": {\n    \"dev\": {\"allowlist\": \"x\"}\n  }\n}", line: 3, col: 26, msg: `agents.dev.allowlist: expected an array, found a string`},
		{name: "entry is a string", in: `{"agents": {"*": {"allowlist": [{"pattern": "/a"}, "/usr/bin/rg"]}}}`, line: 1, col: 52, msg: `agents.*.allowlist[1]: expected an object, found a string`},
		{name: "pattern is a number", in: `{"agents": {"*": {"allowlist": [{"pattern": 5}]}}}`, line: 1, col: 45, msg: `agents.*.allowlist[0].pattern: expected a string, found a number`},
		{name: "lastUsedAt fractional", in: `{"agents": {"*": {"allowlist": [{"pattern": "/a", "lastUsedAt": 1.5}]}}}`, line: 1, col: 65, msg: "not a whole number"},
		{name: "security is a boolean", in: `{"defaults": {"security": true}}`, line: 1, col: 27, msg: "defaults.security: expected a string, found a boolean"},
		{name: "socket is a string", in: `{"socket": "/tmp/s"}`, line: 1, col: 12, msg: "socket: expected an object, found a string"},
		{name: "agent is an array", in: `{"agents": {"dev": []}}`, line: 1, col: 20, msg: "agents.dev: expected an object, found an array"},
		{name: "duplicate key", in: "{\"defaults\": {\"security\": \"deny\",\n \"security\": \"full\"}}", line: 2, col: 2, msg: `duplicate key "security"`},
		{name: "duplicate agent", in: `{"agents": {"a": {}, "a": {}}}`, line: 1, col: 22, msg: `agents: duplicate key "a"`},
		{name: "newer version", in: `{"version": 2}`, line: 1, col: 13, msg: "upgrade", sentinel: ErrUnsupportedVersion},
		{name: "version zero", in: `{"version": 0}`, line: 1, col: 13, msg: "version 0 is not valid"},
		{name: "version string", in: `{"version": "1"}`, line: 1, col: 13, msg: "version: expected a number, found a string"},
		{name: "version fraction", in: `{"version": 1.0}`, line: 1, col: 13, msg: "not an integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("/s/exec-approvals.json", []byte(tt.in))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", f)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is %T, want *ParseError", err, err)
			}
			if pe.Line != tt.line || pe.Col != tt.col {
				t.Errorf("position = %d:%d, want %d:%d (%v)", pe.Line, pe.Col, tt.line, tt.col, err)
			}
			msg := err.Error()
			for _, want := range []string{tt.msg, "/s/exec-approvals.json:", "hint:", "will not overwrite"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not contain %q", msg, want)
				}
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Errorf("error %v does not wrap %v", err, tt.sentinel)
			}
		})
	}
}

// everyLevel has a known and an unknown member at every level of the
// schema, nested unknown values, and text that HTML escaping would mangle.
const everyLevel = `{
  "$schema": "https://example.invalid/s.json",
  "version": 1,
  "socket": {"path": "~/.openclaw/exec-approvals.sock", "token": "tok", "mode": "0600"},
  "defaults": {"security": "allowlist", "ask": "on-miss", "askFallback": "deny", "timeoutSec": 120},
  "agents": {
    "*": {
      "allowlist": [
        {"id": "e1", "pattern": "/usr/bin/rg", "lastUsedAt": 1700000000000, "lastUsedCommand": "rg -n TODO && echo <ok>",
         "lastResolvedPath": "/usr/bin/rg", "note": {"by": ["alice", 1, null, true]}}
      ],
      "color": "blue"
    },
    "dev": {"security": "full", "ask": "always", "askFallback": "allowlist", "nodeBinding": null, "allowlist": [], "x": 1.50}
  },
  "future": [1, {"a": "b"}]
}
`

func TestUnknownFieldsRoundTrip(t *testing.T) {
	f, err := Parse("f", []byte(everyLevel))
	if err != nil {
		t.Fatal(err)
	}
	out, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	if err := json.Unmarshal([]byte(everyLevel), &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	// An empty allowlist is the same as none and is not written back.
	delete(want.(map[string]any)["agents"].(map[string]any)["dev"].(map[string]any), "allowlist")
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("decoded JSON differs after a rewrite (-want +got):\n%s", d)
	}
	if !strings.Contains(string(out), `"rg -n TODO && echo <ok>"`) {
		t.Errorf("strings were HTML-escaped:\n%s", out)
	}
	if !strings.HasSuffix(string(out), "}\n") {
		t.Errorf("output does not end in a newline")
	}
	// Known fields come first, in schema order; unknown ones keep their
	// relative order after them.
	order := []string{`"version"`, `"socket"`, `"defaults"`, `"agents"`, `"$schema"`, `"future"`}
	last := -1
	for _, k := range order {
		i := strings.Index(string(out), "\n  "+k)
		if i < last {
			t.Errorf("top-level key %s at %d, before the previous one (%d):\n%s", k, i, last, out)
		}
		last = i
	}
	again, err := Parse("f", out)
	if err != nil {
		t.Fatal(err)
	}
	out2, err := again.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if string(out2) != string(out) {
		t.Errorf("Marshal is not stable:\n%s\n---\n%s", out, out2)
	}
}

func TestParseWarnings(t *testing.T) {
	f, err := Parse("f", []byte(`{"agents": {"dev": {"Security": "full"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := f.ResolvePolicy("dev").Warnings
	want := []string{
		"version missing; assuming 1 (the next write adds it)",
		`agents.dev: unknown field "Security" is ignored (did you mean "security"?)`,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("warnings (-want +got):\n%s", d)
	}
	if f.Version != 1 {
		t.Errorf("Version = %d, want 1", f.Version)
	}
	if r := f.ResolvePolicy("dev"); r.Local.Security != "deny" {
		t.Errorf("a miscased key took effect: %+v", r.Local)
	}
}

func TestNullsMeanUnset(t *testing.T) {
	f, err := Parse("f", []byte(`{"version": 1, "socket": null, "defaults": {"security": null}, "agents": {"a": null, "b": {"allowlist": null}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &File{Version: 1, Agents: map[string]*Agent{"b": {}}}
	if d := cmp.Diff(want, f, cmpopts.IgnoreUnexported(File{})); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// FuzzParse feeds arbitrary bytes to the parser: it must never panic, and
// whatever it accepts must survive Marshal → Parse unchanged.
func FuzzParse(f *testing.F) {
	f.Add([]byte(everyLevel))
	f.Add([]byte(`{"version":1,"agents":{"*":{"allowlist":[{"pattern":"/usr/bin/*","lastUsedAt":1e3}]}}}`))
	f.Add([]byte(`{"agents":{"a":{"allowlist":"x"}}}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte("{\"defaults\":{\"ask\":\"\\u00e9\\ud800\"},\"x\":\"\xff\"}"))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Parse("fuzz", data)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is %T, want *ParseError", err, err)
			}
			if pe.Line < 1 || pe.Col < 1 {
				t.Fatalf("bad position %d:%d", pe.Line, pe.Col)
			}
			return
		}
		out, err := a.Marshal()
		if err != nil {
			t.Fatalf("Marshal of a parsed file: %v", err)
		}
		b, err := Parse("fuzz", out)
		if err != nil {
			t.Fatalf("Parse of Marshal output: %v\n%s", err, out)
		}
		opts := cmp.Options{cmpopts.IgnoreUnexported(File{}), cmpopts.EquateEmpty()}
		if d := cmp.Diff(a, b, opts); d != "" {
			t.Fatalf("round trip changed the file (-first +second):\n%s", d)
		}
		_ = a.Resolve("x")
	})
}
