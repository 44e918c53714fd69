package sandbox

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"backend", c.Backend, BackendAuto},
		{"scope", c.Scope, ScopeSession},
		{"idleTimeout", time.Duration(c.IdleTimeout), DefaultIdleTimeout},
		{"agent", c.Agent, AgentAuto},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}

// tinySection is a driver section the registry tests register.
type tinySection struct {
	Level int    `json:"level,omitempty"`
	Mode  string `json:"mode,omitempty"`
}

func tinyRegistry(t *testing.T) *Registry {
	t.Helper()
	var r Registry
	d := fakeDriver("tiny", 0)
	d.Config = NewSection("tiny", func(s *tinySection) {
		if s.Level == 0 {
			s.Level = 3
		}
	}, func(s tinySection, c Config) []error {
		var errs []error
		if s.Level > 9 {
			errs = append(errs, KeyError("level", "%d is above 9", s.Level))
		}
		if c.Backend == "tiny" && s.Mode == "" {
			errs = append(errs, KeyError("mode", "required with sandbox.backend \"tiny\""))
		}
		return errs
	})
	if err := r.Register(d); err != nil {
		t.Fatal(err)
	}
	return &r
}

// TestSections: a driver's section is decoded, defaulted and validated by
// its registration alone, survives a JSON round trip, and a key no driver
// owns, or a key inside a section the section does not have, is refused
// with its place named.
func TestSections(t *testing.T) {
	r := tinyRegistry(t)
	var c Config
	if err := json.Unmarshal([]byte(`{"backend":"tiny","scope":"agent","tiny":{"mode":"x"}}`), &c); err != nil {
		t.Fatal(err)
	}
	c = r.WithDefaults(c)
	if err := r.Validate(c); err != nil {
		t.Fatal(err)
	}
	if got := sectionOf[tinySection](r, c, "tiny"); got != (tinySection{Level: 3, Mode: "x"}) {
		t.Errorf("section = %+v, want the written mode and the default level", got)
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back Config
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	back = r.WithDefaults(back)
	if got := sectionOf[tinySection](r, back, "tiny"); got != (tinySection{Level: 3, Mode: "x"}) || back.Scope != ScopeAgent {
		t.Errorf("round trip through %s = %+v, %+v", out, back, got)
	}
	edited := c.WithSection("tiny", tinySection{Level: 7})
	if sectionOf[tinySection](r, c, "tiny").Level != 3 {
		t.Error("WithSection changed the config it was called on")
	}
	if err := r.Validate(edited); err == nil || !strings.Contains(err.Error(), "sandbox.tiny.mode:") {
		t.Errorf("Validate = %v, want the section's own check naming sandbox.tiny.mode", err)
	}
	for in, want := range map[string]string{
		`{"tiny":{"level":12}}`:     "sandbox.tiny.level: 12 is above 9",
		`{"tiny":{"levle":1}}`:      "sandbox.tiny.levle: unknown key (known keys here: level, mode)",
		`{"tiny":{"level":"high"}}`: "sandbox.tiny.level: string is not valid here",
		`{"tiny":"loud"}`:           "sandbox.tiny: string is not valid here",
		`{"docker":{"image":"x"}}`:  "sandbox.docker: unknown key (no sandbox driver in this binary owns it",
		`{"backend":"podman"}`:      `sandbox.backend: unknown sandbox backend "podman" (want auto, tiny or none)`,
	} {
		var c Config
		if err := json.Unmarshal([]byte(in), &c); err != nil {
			t.Fatal(err)
		}
		err := r.Validate(r.WithDefaults(c))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Validate = %v, want %q", in, err, want)
		}
	}
}

func TestValidateNamesTheKey(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantKey string
	}{
		{"backend", func(c *Config) { c.Backend = "podman" }, "sandbox.backend:"},
		{"scope", func(c *Config) { c.Scope = "galaxy" }, "sandbox.scope:"},
		{"idle", func(c *Config) { c.IdleTimeout = -1 }, "sandbox.idleTimeout:"},
		{"agent", func(c *Config) { c.Agent = "sometimes" }, "sandbox.agent:"},
		{"agentBinary", func(c *Config) { c.AgentBinary = "bin/exechost" }, "sandbox.agentBinary:"},
		{"workspace", func(c *Config) { c.Workspace = "relative/ws" }, "sandbox.workspace:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mutate(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.wantKey) {
				t.Errorf("Validate = %v, want an error naming %s", err, tt.wantKey)
			}
		})
	}
}

func TestDurationJSON(t *testing.T) {
	for _, bad := range []string{`30`, `"30"`, `"forever"`, `null`} {
		var d Duration
		if err := json.Unmarshal([]byte(bad), &d); err == nil && bad != "null" {
			t.Errorf("Unmarshal(%s) accepted", bad)
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"512", 512, true},
		{"512b", 512, true},
		{"64k", 64 << 10, true},
		{"512m", 512 << 20, true},
		{"2G", 2 << 30, true},
		{" 1g ", 1 << 30, true},
		{"", 0, false},
		{"m", 0, false},
		{"-1m", 0, false},
		{"1.5g", 0, false},
		{"1t", 0, false},
		{"99999999999999g", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"512m", "0", "1g", "-1", "9223372036854775807", "k"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err == nil && n < 0 {
			t.Errorf("ParseSize(%q) = %d, negative", s, n)
		}
	})
}

// FuzzConfigJSON feeds arbitrary "sandbox" objects through decoding, defaults
// and validation: nothing may panic, and a config that validates must keep
// the safe defaults where it said nothing (the drivers' sections have
// their own fuzz test in package pick, where they are registered).
func FuzzConfigJSON(f *testing.F) {
	f.Add(`{}`)
	f.Add(`{"backend":"docker","docker":{"memory":"1g","readOnlyRoot":false}}`)
	f.Add(`{"scope":"shared","idleTimeout":"1h","bwrap":{"roBind":["/x"]}}`)
	f.Fuzz(func(t *testing.T, s string) {
		var c Config
		if json.Unmarshal([]byte(s), &c) != nil {
			return
		}
		c = c.WithDefaults()
		if c.Validate() != nil {
			return
		}
		if c.Backend == "" || c.Agent == "" || c.Scope == "" || c.IdleTimeout == 0 {
			t.Errorf("defaults missing after WithDefaults: %+v", c)
		}
	})
}

func TestWorkspace(t *testing.T) {
	state := t.TempDir()
	cfg := DefaultConfig()
	tests := []struct {
		scope Scope
		agent string
		want  string
		ok    bool
	}{
		{ScopeSession, "main", state + "/sandboxes/main", true},
		{ScopeAgent, "a-b_c.d", state + "/sandboxes/a-b_c.d", true},
		{ScopeShared, "anything", state + "/sandboxes/.shared", true},
		{ScopeSession, "", "", false},
		{ScopeSession, "..", "", false},
		{ScopeSession, ".shared", "", false},
		{ScopeSession, "a/b", "", false},
		{ScopeSession, "a\x00b", "", false},
	}
	for _, tt := range tests {
		cfg.Scope = tt.scope
		got, err := EnsureWorkspace(cfg, state, Request{AgentID: tt.agent}, WorkspaceOwner{})
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("EnsureWorkspace(%s, %q) = %q, %v; want %q ok=%v", tt.scope, tt.agent, got, err, tt.want, tt.ok)
		}
	}
}

func TestScopeKey(t *testing.T) {
	a1 := Request{AgentID: "a", SessionKey: "1"}
	a2 := Request{AgentID: "a", SessionKey: "2"}
	b1 := Request{AgentID: "b", SessionKey: "1"}
	tests := []struct {
		scope      Scope
		x, y       Request
		sameSandbx bool
	}{
		{ScopeSession, a1, a1, true},
		{ScopeSession, a1, a2, false},
		{ScopeSession, a1, b1, false},
		{ScopeAgent, a1, a2, true},
		{ScopeAgent, a1, b1, false},
		{ScopeShared, a1, b1, true},
	}
	for _, tt := range tests {
		if got := ScopeKey(tt.scope, tt.x) == ScopeKey(tt.scope, tt.y); got != tt.sameSandbx {
			t.Errorf("%s: same sandbox for %+v and %+v = %v, want %v", tt.scope, tt.x, tt.y, got, tt.sameSandbx)
		}
	}
}

func TestContainerCwdAndEnv(t *testing.T) {
	for in, want := range map[string]string{"": "/workspace", "sub/dir": "/workspace/sub/dir", "/tmp/../etc": "/etc", "../x": "/x"} {
		if got := ContainerCwd(in); got != want {
			t.Errorf("ContainerCwd(%q) = %q, want %q", in, got, want)
		}
	}
	env, err := EnvList(map[string]string{"B": "2", "A": "1=1"})
	if diff := cmp.Diff([]string{"A=1=1", "B=2"}, env); err != nil || diff != "" {
		t.Errorf("EnvList: %v %s", err, diff)
	}
	for _, bad := range []map[string]string{{"": "x"}, {"A=B": "x"}, {"A": "x\x00y"}} {
		if _, err := EnvList(bad); err == nil {
			t.Errorf("EnvList(%q) accepted", bad)
		}
	}
}

// TestWorkspaceIsPrivate is issue 32's last door: a workspace outside the
// state directory is 0700 — owned, when running as root, by the sandbox
// user who writes it — and one an older version left 0777 is tightened.
func TestWorkspaceIsPrivate(t *testing.T) {
	root := filepath.Join(t.TempDir(), "elsewhere")
	cfg := Config{Workspace: root, Scope: ScopeAgent}
	dir, err := EnsureWorkspace(cfg, t.TempDir(), Request{AgentID: "a"}, WorkspaceOwner{})
	if err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("workspace mode %o, want 700", fi.Mode().Perm())
		}
		if st := fi.Sys().(*syscall.Stat_t); os.Geteuid() == 0 && (st.Uid != 65534 || st.Gid != 65534) {
			t.Errorf("workspace owned by %d:%d, want the sandbox user 65534:65534", st.Uid, st.Gid)
		}
	}
	check()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureWorkspace(cfg, t.TempDir(), Request{AgentID: "a"}, WorkspaceOwner{}); err != nil {
		t.Fatal(err)
	}
	check()
}
