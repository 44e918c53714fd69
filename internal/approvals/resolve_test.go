package approvals

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/policy"
)

func TestResolve(t *testing.T) {
	type want struct {
		local   policy.Local
		sources map[string]string
		skipped []string
	}
	builtin := map[string]string{"security": "built-in", "ask": "built-in", "askFallback": "built-in"}
	tests := []struct {
		name  string
		file  string
		agent string
		want  want
	}{
		{
			name: "empty file: built-in defaults",
			file: `{"version": 1}`, agent: "dev",
			want: want{local: policy.Local{Security: "deny", Ask: "on-miss", Fallback: "deny"}, sources: builtin},
		},
		{
			name: "defaults only",
			file: `{"defaults": {"security": "allowlist", "ask": "off", "askFallback": "allowlist"}}`, agent: "dev",
			want: want{local: policy.Local{Security: "allowlist", Ask: "off", Fallback: "allowlist"},
				sources: map[string]string{"security": "defaults", "ask": "defaults", "askFallback": "defaults"}},
		},
		{
			name: "agent over wildcard over defaults, field by field",
			file: `{"defaults": {"security": "deny", "ask": "always", "askFallback": "full"},
			        "agents": {"*": {"ask": "off"}, "dev": {"security": "allowlist"}}}`,
			agent: "dev",
			want: want{local: policy.Local{Security: "allowlist", Ask: "off", Fallback: "full"},
				sources: map[string]string{"security": "agents.dev", "ask": "agents.*", "askFallback": "defaults"}},
		},
		{
			name:  "another agent gets only the wildcard",
			file:  `{"agents": {"*": {"security": "allowlist"}, "dev": {"security": "full"}}}`,
			agent: "ops",
			want: want{local: policy.Local{Security: "allowlist", Ask: "on-miss", Fallback: "deny"},
				sources: map[string]string{"security": "agents.*", "ask": "built-in", "askFallback": "built-in"}},
		},
		{
			name:  "empty agent id is the wildcard",
			file:  `{"agents": {"*": {"security": "full"}}}`,
			agent: "",
			want: want{local: policy.Local{Security: "full", Ask: "on-miss", Fallback: "deny"},
				sources: map[string]string{"security": "agents.*", "ask": "built-in", "askFallback": "built-in"}},
		},
		{
			name:  "valid values in odd spelling",
			file:  `{"agents": {"dev": {"security": " Allowlist ", "ask": "ALWAYS"}}}`,
			agent: "dev",
			want: want{local: policy.Local{Security: "allowlist", Ask: "always", Fallback: "deny"},
				sources: map[string]string{"security": "agents.dev", "ask": "agents.dev", "askFallback": "built-in"}},
		},
		{
			name: "invalid values fall back level by level",
			file: `{"defaults": {"security": "allowlist", "ask": "sometimes", "askFallback": "nope"},
			        "agents": {"*": {"ask": "never", "security": "ful"}, "dev": {"ask": "sometimes", "security": "everything", "askFallback": "full"}}}`,
			agent: "dev",
			want: want{
				local:   policy.Local{Security: "allowlist", Ask: "on-miss", Fallback: "full"},
				sources: map[string]string{"security": "defaults", "ask": "built-in", "askFallback": "agents.dev"},
				skipped: []string{
					`agents.dev.security "everything" is not valid (accepted: deny, allowlist, full); using defaults ("allowlist")`,
					`agents.*.security "ful" is not valid (accepted: deny, allowlist, full); using defaults ("allowlist")`,
					`agents.dev.ask "sometimes" is not valid (accepted: off, on-miss, always); using built-in ("on-miss")`,
					`agents.*.ask "never" is not valid (accepted: off, on-miss, always); using built-in ("on-miss")`,
					`defaults.ask "sometimes" is not valid (accepted: off, on-miss, always); using built-in ("on-miss")`,
				},
			},
		},
		{
			name:  "an invalid wildcard value below a valid agent value is not reported",
			file:  `{"agents": {"*": {"security": "bad"}, "dev": {"security": "full"}}}`,
			agent: "dev",
			want: want{local: policy.Local{Security: "full", Ask: "on-miss", Fallback: "deny"},
				sources: map[string]string{"security": "agents.dev", "ask": "built-in", "askFallback": "built-in"}},
		},
		{
			name:  "invalid value with nothing below falls to built-in deny",
			file:  `{"defaults": {"security": "", "askFallback": "allow"}}`,
			agent: "x",
			want: want{local: policy.Local{Security: "deny", Ask: "on-miss", Fallback: "deny"}, sources: builtin,
				skipped: []string{`defaults.askFallback "allow" is not valid (accepted: deny, allowlist, full); using built-in ("deny")`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("f", []byte(tt.file))
			if err != nil {
				t.Fatal(err)
			}
			r := f.ResolvePolicy(tt.agent)
			got := want{local: r.Local, sources: r.Sources, skipped: r.Skipped}
			if d := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestResolveAllowlistOrder(t *testing.T) {
	f, err := Parse("f", []byte(`{"version": 1, "agents": {
		"dev": {"allowlist": [{"id": "d1", "pattern": "/opt/dev/bin/*"}]},
		"*":   {"allowlist": [{"id": "w1", "pattern": "/usr/bin/rg"}, {"id": "w2", "pattern": "/usr/bin/git"}]},
		"ops": {"allowlist": [{"id": "o1", "pattern": "/opt/ops/bin/*"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		agent string
		want  []string
	}{
		{"dev", []string{"/usr/bin/rg", "/usr/bin/git", "/opt/dev/bin/*"}},
		{"ops", []string{"/usr/bin/rg", "/usr/bin/git", "/opt/ops/bin/*"}},
		{"*", []string{"/usr/bin/rg", "/usr/bin/git"}},
		{"other", []string{"/usr/bin/rg", "/usr/bin/git"}},
	}
	for _, tt := range tests {
		r := f.ResolvePolicy(tt.agent)
		if d := cmp.Diff(tt.want, r.Patterns()); d != "" {
			t.Errorf("Patterns(%q) (-want +got):\n%s", tt.agent, d)
		}
		if tt.agent == "dev" && (r.Allowlist[0].Agent != "*" || r.Allowlist[2].Agent != "dev") {
			t.Errorf("owners: %+v", r.Allowlist)
		}
	}
}

func TestResolveLintWarnings(t *testing.T) {
	f, err := Parse("f", []byte(`{"version": 1, "agents": {"*": {"allowlist": [
		{"pattern": "rg"}, {"pattern": "bin/rg"}, {"pattern": "/usr/bin/rg"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := f.ResolvePolicy("dev").Warnings
	if len(got) != 2 || !strings.HasPrefix(got[0], `agents.*.allowlist[0]: pattern "rg" has no '/'`) ||
		!strings.HasPrefix(got[1], `agents.*.allowlist[1]: pattern "bin/rg" is relative`) {
		t.Errorf("warnings = %q", got)
	}
}

func TestCoverWarning(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string, mode os.FileMode) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	safe := mk("safe/bin", 0o755)
	world := mk("world", 0o777)
	mk("world/bin", 0o755)
	group := mk("group", 0o775)
	sticky := mk("sticky", 0o777|os.ModeSticky)
	mk("sticky/mine", 0o755)
	tests := []struct {
		pattern string
		want    string // substring; "" means no warning
	}{
		{safe + "/rg", ""},
		{safe + "/*", ""},
		{root + "/safe/**/rg", ""},
		{world + "/bin/rg", world + " is world-writable"},
		{world + "/*/rg", world + " is world-writable"},
		{sticky + "/mine/rg", ""},
		{sticky + "/absent/rg", sticky + " is world-writable"},
		{sticky + "/*", sticky + " is world-writable"},
		{"~/bin/rg", ""},
		{"/nonexistent-dir-for-test/rg", ""},
	}
	if os.Getuid() == 0 {
		// As root, a group-writable directory owned by group root is
		// trusted; one owned by another group is not.
		if err := os.Chown(group, 0, 65534); err == nil {
			tests = append(tests, struct{ pattern, want string }{group + "/rg", group + " is group-writable (gid 65534)"})
		}
	}
	for _, tt := range tests {
		got := coverWarning(tt.pattern, safe, map[string]string{})
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("coverWarning(%q) = %q, want %q", tt.pattern, got, tt.want)
		}
	}

	f := Default()
	f.AddPattern("*", world+"/bin/rg")
	f.AddPattern("*", safe+"/rg")
	if w := f.Resolve("dev").Warnings; len(w) != 1 || !strings.HasPrefix(w[0], "agents.*.allowlist[0]: pattern") {
		t.Errorf("Resolve warnings = %q", w)
	}
	if w := f.ResolvePolicy("dev").Warnings; len(w) != 0 {
		t.Errorf("ResolvePolicy touched the filesystem: %q", w)
	}
}

func TestLiteralDir(t *testing.T) {
	for in, want := range map[string]string{
		"/usr/bin/rg":       "/usr/bin",
		"/opt/x/*/bin/rg":   "/opt/x",
		"/opt/**":           "/opt",
		"/*/bin/rg":         "/",
		"/opt/r?/bin":       "/opt",
		"/opt/{a,b}/bin/rg": "/opt",
		"/rg":               "/",
	} {
		if got := literalDir(in); got != want {
			t.Errorf("literalDir(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEdits(t *testing.T) {
	f := Default()
	if !f.AddPattern("", "/usr/bin/rg") {
		t.Fatal("AddPattern to the wildcard failed")
	}
	if f.AddPattern("*", " /USR/BIN/RG ") {
		t.Error("AddPattern added a case-insensitive duplicate")
	}
	if f.AddPattern("dev", "  ") {
		t.Error("AddPattern added an empty pattern")
	}
	if !f.AddPattern("dev", "/usr/bin/rg") {
		t.Error("the same pattern for another agent was refused")
	}
	if !f.AddPattern("dev", "/usr/bin/git") {
		t.Error("AddPattern failed")
	}
	id := f.Agents["dev"].Allowlist[1].ID
	if id == "" || id == f.Agents["dev"].Allowlist[0].ID {
		t.Errorf("entry ids not unique: %+v", f.Agents["dev"].Allowlist)
	}

	// RecordUse finds the wildcard's entry first, as matching does.
	at := time.UnixMilli(1_700_000_000_123)
	if !f.RecordUse("dev", "/usr/bin/rg", "rg -n x", "/usr/lib/rg", at) {
		t.Fatal("RecordUse found nothing")
	}
	if e := f.Agents["*"].Allowlist[0]; e.LastUsedAt != 1_700_000_000_123 || e.LastUsedCommand != "rg -n x" || e.LastResolvedPath != "/usr/lib/rg" {
		t.Errorf("wildcard entry = %+v", e)
	}
	if e := f.Agents["dev"].Allowlist[0]; e.LastUsedAt != 0 {
		t.Errorf("agent entry was touched too: %+v", e)
	}
	if !f.RecordUse("dev", "/usr/bin/git", strings.Repeat("é", MaxCommandLen), "/usr/bin/git", at) {
		t.Fatal("RecordUse on the agent's entry found nothing")
	}
	if c := f.Agents["dev"].Allowlist[1].LastUsedCommand; len(c) > MaxCommandLen+len("…") || !strings.HasSuffix(c, "…") {
		t.Errorf("long command not truncated cleanly: %d bytes", len(c))
	}
	if f.RecordUse("ops", "/usr/bin/git", "git", "/usr/bin/git", at) {
		t.Error("RecordUse for ops found dev's entry")
	}

	if !f.RemovePattern("dev", id) {
		t.Error("RemovePattern by id failed")
	}
	if !f.RemovePattern("dev", "/Usr/Bin/RG") {
		t.Error("RemovePattern by pattern failed")
	}
	if f.RemovePattern("dev", "/usr/bin/rg") || f.RemovePattern("nobody", "/usr/bin/rg") {
		t.Error("RemovePattern removed something twice")
	}
	if got := f.ResolvePolicy("dev").Patterns(); !cmp.Equal(got, []string{"/usr/bin/rg"}) {
		t.Errorf("patterns after edits = %q", got)
	}
}

func TestCloneIsDeep(t *testing.T) {
	f, err := Parse("f", []byte(everyLevel))
	if err != nil {
		t.Fatal(err)
	}
	before, _ := f.Marshal()
	c := f.Clone()
	c.Agents["*"].Allowlist[0].Pattern = "/changed"
	c.Agents["*"].Allowlist[0].Extra[0].Value[0] = ' '
	c.Extra[0].Value[1] = 'X'
	c.Agents["dev"].Security = "deny"
	c.AddPattern("new", "/x/y")
	after, _ := f.Marshal()
	if string(before) != string(after) {
		t.Errorf("changing a clone changed the original")
	}
	r := f.Redacted()
	if r.Socket.Token != "" || f.Socket.Token != "tok" {
		t.Errorf("Redacted: copy token %q, original %q", r.Socket.Token, f.Socket.Token)
	}
	if f.Hash() != r.Hash() {
		t.Error("Hash depends on the token")
	}
	if f.Hash() == c.Hash() {
		t.Error("Hash ignores an allowlist change")
	}
}

func TestSocketPathAndNormalize(t *testing.T) {
	f := Default()
	if got := f.SocketPath("/state", "/home/u"); got != "/state/exec-approvals.sock" {
		t.Errorf("default socket path = %q", got)
	}
	for in, want := range map[string]string{
		"~/.openclaw/a.sock": "/home/u/.openclaw/a.sock",
		"/run/x.sock":        "/run/x.sock",
		"rel.sock":           "/state/rel.sock",
	} {
		f.Socket.Path = in
		if got := f.SocketPath("/state", "/home/u"); got != want {
			t.Errorf("SocketPath(%q) = %q, want %q", in, got, want)
		}
	}

	g, err := Parse("f", []byte(`{"defaults": {"ask": "ALWAYS", "security": "bogus"}, "agents": {"a": {"allowlist": [{"pattern": "/x"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	g.Normalize("/state")
	if g.Socket.Path != "/state/exec-approvals.sock" || len(g.Socket.Token) < 32 {
		t.Errorf("socket after Normalize = %+v", g.Socket)
	}
	want := Defaults{Security: "bogus", Ask: "always", AskFallback: "deny"}
	if d := cmp.Diff(want, g.Defaults); d != "" {
		t.Errorf("defaults after Normalize (-want +got):\n%s", d)
	}
	if g.Agents["a"].Allowlist[0].ID == "" {
		t.Error("Normalize left an entry without id")
	}
	if w := g.ResolvePolicy("a").Warnings; len(w) != 0 {
		t.Errorf("warnings after Normalize = %q", w)
	}
}

func TestNewToken(t *testing.T) {
	a, b := NewToken(), NewToken()
	if a == b || len(a) != 43 || strings.ContainsAny(a, "+/=") {
		t.Errorf("tokens %q %q: want distinct 43-char base64url without padding", a, b)
	}
}
