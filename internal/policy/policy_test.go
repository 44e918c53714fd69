package policy

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	for _, s := range []string{"deny", "allowlist", "full", " Full "} {
		if _, err := ParseSecurity(s); err != nil {
			t.Errorf("ParseSecurity(%q): %v", s, err)
		}
	}
	for _, s := range []string{"", "allow", "fulll", "on-miss"} {
		_, err := ParseSecurity(s)
		if !errors.Is(err, ErrInvalidValue) {
			t.Errorf("ParseSecurity(%q) = %v, want ErrInvalidValue", s, err)
		}
	}
	_, err := ParseAsk("sometimes")
	if err == nil || !strings.Contains(err.Error(), "accepted: off, on-miss, always") {
		t.Errorf("ParseAsk error should list accepted values, got %v", err)
	}
	if _, err := ParseHost("node"); err != nil {
		t.Error(err)
	}
	if _, err := ParseFallback("allowlist"); err != nil {
		t.Error(err)
	}
	if Security("").Valid() || Ask("").Valid() || Host("").Valid() || Fallback("").Valid() {
		t.Error("empty values must not be valid")
	}
}

func TestResolvePrecedence(t *testing.T) {
	tool := Settings{Host: HostNode}
	session := Settings{Host: HostGateway, Security: SecurityFull}
	agent := Settings{Security: SecurityAllowlist, Ask: AskAlways, Node: "agent-node"}
	global := Settings{Host: HostSandbox, Security: SecurityDeny, Ask: AskOff, Node: "global-node"}
	tests := []struct {
		name   string
		layers []Settings
		want   Settings
	}{
		{"nothing set: built-in defaults", nil, Settings{Host: HostSandbox, Security: SecurityDeny, Ask: AskOnMiss}},
		{"global only", []Settings{global}, global},
		{"agent over global", []Settings{agent, global}, Settings{Host: HostSandbox, Security: SecurityAllowlist, Ask: AskAlways, Node: "agent-node"}},
		{"session over agent", []Settings{session, agent, global}, Settings{Host: HostGateway, Security: SecurityFull, Ask: AskAlways, Node: "agent-node"}},
		{"tool param over all", []Settings{tool, session, agent, global}, Settings{Host: HostNode, Security: SecurityFull, Ask: AskAlways, Node: "agent-node"}},
		{"invalid values fall through", []Settings{{Host: "moon", Security: "yolo", Ask: "maybe"}, global}, global},
		{"invalid everywhere: defaults", []Settings{{Host: "x", Security: "y", Ask: "z"}}, Settings{Host: HostSandbox, Security: SecurityDeny, Ask: AskOnMiss}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Resolve(tt.layers...)); diff != "" {
				t.Errorf("Resolve (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStricterAndMoreAsking(t *testing.T) {
	for _, a := range append(Securities(), "bogus") {
		for _, b := range append(Securities(), "bogus") {
			got := Stricter(a, b)
			want := a
			if b.rank() < a.rank() {
				want = b
			}
			if !want.Valid() {
				want = SecurityDeny
			}
			if got != want {
				t.Errorf("Stricter(%s,%s)=%s want %s", a, b, got, want)
			}
			if Stricter(a, b) != Stricter(b, a) {
				t.Errorf("Stricter not symmetric for %s,%s", a, b)
			}
		}
	}
	for _, a := range append(Asks(), "bogus") {
		for _, b := range append(Asks(), "bogus") {
			if MoreAsking(a, b) != MoreAsking(b, a) {
				t.Errorf("MoreAsking not symmetric for %s,%s", a, b)
			}
			if a == "bogus" || b == "bogus" {
				if MoreAsking(a, b) != AskAlways {
					t.Errorf("unknown ask must count as always: %s,%s", a, b)
				}
			}
		}
	}
}

func TestCombine(t *testing.T) {
	local := Local{Security: SecurityAllowlist, Ask: AskOnMiss, Fallback: FallbackAllowlist}
	tests := []struct {
		reqS Security
		reqA Ask
		loc  Local
		want Effective
	}{
		{"", "", local, Effective{SecurityAllowlist, AskOnMiss, FallbackAllowlist}},
		{SecurityFull, AskOff, local, Effective{SecurityAllowlist, AskOnMiss, FallbackAllowlist}},
		{SecurityDeny, "", local, Effective{SecurityDeny, AskOnMiss, FallbackAllowlist}},
		{"", AskAlways, local, Effective{SecurityAllowlist, AskAlways, FallbackAllowlist}},
		{SecurityFull, AskOff, Local{Security: SecurityFull, Ask: AskOff, Fallback: FallbackFull}, Effective{SecurityFull, AskOff, FallbackFull}},
		{"", "", Local{}, Effective{SecurityDeny, AskOnMiss, FallbackDeny}},
		{SecurityFull, "", Local{Security: "garbage"}, Effective{SecurityDeny, AskOnMiss, FallbackDeny}},
	}
	for i, tt := range tests {
		if diff := cmp.Diff(tt.want, Combine(tt.reqS, tt.reqA, tt.loc)); diff != "" {
			t.Errorf("case %d (-want +got):\n%s", i, diff)
		}
	}
}

// TestDecideExhaustive checks every combination of the decision's inputs
// against the rules written out independently.
func TestDecideExhaustive(t *testing.T) {
	for _, sec := range append(Securities(), "bogus") {
		for _, ask := range append(Asks(), "bogus") {
			for _, ok := range []bool{true, false} {
				for _, sat := range []bool{true, false} {
					in := Input{Effective: Effective{Security: sec, Ask: ask, Fallback: FallbackDeny}, AnalysisOK: ok, AnalysisError: "command substitution", AllowlistSatisfied: sat}
					d := Decide(in)
					name := fmt.Sprintf("%s/%s/ok=%v/sat=%v", sec, ask, ok, sat)
					var want Outcome
					switch {
					case sec == SecurityFull && ask == AskAlways, sec == SecurityFull && ask == "bogus":
						want = AskHuman
					case sec == SecurityFull:
						want = Allow
					case sec == SecurityAllowlist && (ask == AskAlways || ask == "bogus"):
						want = AskHuman
					case sec == SecurityAllowlist && ok && sat:
						want = Allow
					case sec == SecurityAllowlist && ask == AskOnMiss:
						want = AskHuman
					default:
						want = DenyRun
					}
					if d.Outcome != want {
						t.Errorf("%s: outcome %s, want %s (reason %q)", name, d.Outcome, want, d.Reason)
					}
					if (d.Outcome == DenyRun) != (d.Err != nil) {
						t.Errorf("%s: Err must be set exactly on deny: %+v", name, d)
					}
					if d.Outcome == Allow && sec != SecurityFull && !ok {
						t.Errorf("%s: allowed a command whose analysis failed", name)
					}
					if sec == SecurityAllowlist && !ok && d.Outcome != Allow && ask != AskAlways && ask != "bogus" {
						if !strings.HasPrefix(d.Reason, ReasonAnalysisFailed+": command substitution") {
							t.Errorf("%s: reason %q should say what failed", name, d.Reason)
						}
					}
				}
			}
		}
	}
}

func TestDecideReasons(t *testing.T) {
	tests := []struct {
		in     Input
		reason string
		err    error
	}{
		{Input{Effective: Effective{Security: SecurityDeny, Ask: AskOff}}, "security=deny", ErrDisabled},
		{Input{Effective: Effective{Security: SecurityAllowlist, Ask: AskOff}, AnalysisOK: true}, "allowlist-miss", ErrAllowlistMiss},
		{Input{Effective: Effective{Security: SecurityAllowlist, Ask: AskOnMiss}, AnalysisOK: true}, "allowlist-miss", nil},
		{Input{Effective: Effective{Security: SecurityAllowlist, Ask: AskOff}, AnalysisOK: true, AllowlistSatisfied: true}, "allowlist-match", nil},
		{Input{Effective: Effective{Security: SecurityAllowlist, Ask: AskAlways}, AnalysisOK: true, AllowlistSatisfied: true}, "ask=always", nil},
		{Input{Effective: Effective{Security: SecurityFull, Ask: AskOnMiss}}, "security=full", nil},
		{Input{Effective: Effective{Security: SecurityAllowlist, Ask: AskOff}, AnalysisError: "eval"}, "analysis-failed: eval", ErrAllowlistMiss},
	}
	for _, tt := range tests {
		d := Decide(tt.in)
		if d.Reason != tt.reason {
			t.Errorf("%+v: reason %q, want %q", tt.in, d.Reason, tt.reason)
		}
		if tt.err != nil && !errors.Is(d.Err, tt.err) {
			t.Errorf("%+v: err %v, want %v", tt.in, d.Err, tt.err)
		}
	}
	if got := Decide(Input{Effective: Effective{Security: SecurityDeny}}).Err.Error(); !strings.HasPrefix(got, "SYSTEM_RUN_DISABLED: security=deny") {
		t.Errorf("wire error text: %q", got)
	}
}

func TestNoAnswerFallbacks(t *testing.T) {
	base := Effective{Security: SecurityAllowlist, Ask: AskOnMiss}
	tests := []struct {
		fb      Fallback
		ok, sat bool
		want    Outcome
		err     error
	}{
		{FallbackDeny, true, true, DenyRun, ErrApprovalRequired},
		{FallbackDeny, true, false, DenyRun, ErrApprovalRequired},
		{FallbackAllowlist, true, true, Allow, nil},
		{FallbackAllowlist, true, false, DenyRun, ErrAllowlistMiss},
		{FallbackAllowlist, false, true, DenyRun, ErrAllowlistMiss},
		{FallbackFull, false, false, Allow, nil},
		{"bogus", true, true, DenyRun, ErrApprovalRequired},
	}
	for _, tt := range tests {
		e := base
		e.Fallback = tt.fb
		d := NoAnswer(Input{Effective: e, AnalysisOK: tt.ok, AllowlistSatisfied: tt.sat}, "approver unreachable")
		if d.Outcome != tt.want {
			t.Errorf("%s ok=%v sat=%v: %s want %s", tt.fb, tt.ok, tt.sat, d.Outcome, tt.want)
		}
		if tt.err != nil && !errors.Is(d.Err, tt.err) {
			t.Errorf("%s: err %v want %v", tt.fb, d.Err, tt.err)
		}
		if !strings.Contains(d.Reason, "approver unreachable") {
			t.Errorf("%s: reason %q must say why the fallback applied", tt.fb, d.Reason)
		}
	}
}

func TestAnswer(t *testing.T) {
	if d := Answer(AllowOnce, "tui"); d.Outcome != Allow || d.Err != nil || !strings.Contains(d.Reason, "by tui") {
		t.Errorf("allow-once: %+v", d)
	}
	if d := Answer(AllowAlways, ""); d.Outcome != Allow {
		t.Errorf("allow-always: %+v", d)
	}
	for _, a := range []Approval{Reject, "", "bogus"} {
		d := Answer(a, "web")
		if d.Outcome != DenyRun || !errors.Is(d.Err, ErrUserDenied) {
			t.Errorf("answer %q must deny with ErrUserDenied: %+v", a, d)
		}
	}
}

func TestMatchPattern(t *testing.T) {
	home := "/home/ada"
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"/usr/bin/rg", "/usr/bin/rg", true},
		{"/usr/bin/rg", "/usr/bin/rga", false},
		{"/USR/BIN/RG", "/usr/bin/rg", false}, // fold-only: a different file unless SameFile says otherwise
		{"/usr/bin/*", "/usr/bin/rg", true},
		{"/usr/bin/*", "/usr/bin/x/rg", false},
		{"/usr/**", "/usr/local/bin/rg", true},
		{"/usr/bin/r?", "/usr/bin/rg", true},
		{"~/Projects/**/bin/rg", "/home/ada/Projects/a/b/bin/rg", true},
		{"~/Projects/**/bin/rg", "/home/eve/Projects/a/bin/rg", false},
		{"~", "/home/ada", true},
		{"rg", "/usr/bin/rg", false},               // bare names match nothing
		{"bin/rg", "/usr/bin/rg", false},           // relative patterns match nothing
		{"~eve/bin/rg", "/home/eve/bin/rg", false}, // ~user is not expanded
		{"/usr/bin/rg", "usr/bin/rg", false},       // only absolute paths
		{"/usr/bin/rg", "/usr/bin/../bin/rg", true},
		{"/usr/bin/[", "/usr/bin/[", false}, // invalid glob
		{"", "/usr/bin/rg", false},
	}
	for _, tt := range tests {
		if got := MatchPattern(tt.pattern, tt.path, home); got != tt.want {
			t.Errorf("MatchPattern(%q, %q) = %v, want %v", tt.pattern, tt.path, got, tt.want)
		}
	}
}

// TestAllowlistEquivalence checks the compiled matcher against the simple
// reference (first pattern in order that MatchPattern accepts).
func TestAllowlistEquivalence(t *testing.T) {
	home := "/home/ada"
	patterns := []string{"rg", "/usr/bin/*", "/usr/bin/rg", "~/bin/**", "/opt/*/bin/tool", "/**/sbin/x", "/usr/local/bin/{a,b}", "/Usr/Local/Bin/C", "/usr/bin/r?", "/srv/[ab]*/run", ""}
	paths := []string{"/usr/bin/rg", "/usr/bin/ls", "/home/ada/bin/x/y", "/opt/p/bin/tool", "/opt/p/q/bin/tool", "/a/b/sbin/x", "/sbin/x", "/usr/local/bin/a", "/usr/local/bin/c", "/usr/local/bin/d", "/srv/alpha/run", "/srv/zeta/run", "relative", "/"}
	a := CompileAllowlist(patterns, home)
	same := CompileAllowlist(patterns, home)
	same.SameFile = func(string, string) bool { return true } // a case-insensitive filesystem
	for _, p := range paths {
		want := FirstMatch(patterns, p, home, nil)
		if got := a.Match(p); got != want {
			t.Errorf("Match(%q) = %q, reference says %q", p, got, want)
		}
		want = FirstMatch(patterns, p, home, same.SameFile)
		if got := same.Match(p); got != want {
			t.Errorf("Match(%q) with SameFile = %q, reference says %q", p, got, want)
		}
	}
	if _, sat := a.MatchAll(nil); !sat {
		t.Error("a command that starts no executable (only interpreter builtins) must satisfy the allowlist")
	}
	m, sat := a.MatchAll([]string{"/usr/bin/rg", "/nowhere/x"})
	if sat || m[0] != "/usr/bin/*" || m[1] != "" {
		t.Errorf("MatchAll = %v %v", m, sat)
	}
}

// TestFoldOnlyMatches: a path that matches a pattern only when case is
// ignored is allowed only when SameFile says the pattern's own spelling is
// the same file; nil SameFile fails closed, and Explain names the refused
// near-miss.
func TestFoldOnlyMatches(t *testing.T) {
	home := "/home/ada"
	tests := []struct {
		name     string
		patterns []string
		path     string
		same     bool // what SameFile answers
		hook     bool // whether SameFile is set at all
		want     string
		fold     bool
		refused  []string
		spelling string // what SameFile must be asked about
	}{
		{name: "exact case needs no hook", patterns: []string{"/x/head"}, path: "/x/head", want: "/x/head"},
		{name: "fold-only without hook fails closed", patterns: []string{"/x/head"}, path: "/x/HEAD", refused: []string{"/x/head"}},
		{name: "fold-only, different file", patterns: []string{"/x/head"}, path: "/x/HEAD", hook: true, refused: []string{"/x/head"}, spelling: "/x/head"},
		{name: "fold-only, same file", patterns: []string{"/x/head"}, path: "/x/HEAD", hook: true, same: true, want: "/x/head", fold: true, spelling: "/x/head"},
		{name: "glob literal dir differs in case", patterns: []string{"/Opt/Tools/*"}, path: "/opt/tools/run", hook: true, same: true, want: "/Opt/Tools/*", fold: true, spelling: "/Opt/Tools/run"},
		{name: "glob wildcard part differs: no spelling, refused", patterns: []string{"/usr/bin/HE*"}, path: "/usr/bin/head", hook: true, same: true, refused: []string{"/usr/bin/HE*"}},
		{name: "a later exact pattern wins over a refused fold", patterns: []string{"/usr/bin/head", "/usr/bin/*"}, path: "/usr/bin/HEAD", hook: true, want: "/usr/bin/*", refused: []string{"/usr/bin/head"}, spelling: "/usr/bin/head"},
		{name: "home-expanded spelling", patterns: []string{"~/Bin/tool"}, path: "/home/ada/bin/tool", hook: true, same: true, want: "~/Bin/tool", fold: true, spelling: "/home/ada/Bin/tool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := CompileAllowlist(tt.patterns, home)
			var asked []string
			if tt.hook {
				a.SameFile = func(spelling, p string) bool {
					if p != tt.path {
						t.Errorf("SameFile got path %q, want %q", p, tt.path)
					}
					asked = append(asked, spelling)
					return tt.same
				}
			}
			got := a.Explain(tt.path)
			want := Result{Pattern: tt.want, FoldOnly: tt.fold, Refused: tt.refused}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Explain(%q) (-want +got):\n%s", tt.path, diff)
			}
			if tt.spelling != "" && (len(asked) == 0 || asked[0] != tt.spelling) {
				t.Errorf("SameFile asked about %q, want %q", asked, tt.spelling)
			}
			if ref := FirstMatch(tt.patterns, tt.path, home, a.SameFile); ref != got.Pattern {
				t.Errorf("reference FirstMatch = %q, compiled = %q", ref, got.Pattern)
			}
		})
	}
}

func TestLintPattern(t *testing.T) {
	for p, want := range map[string]string{
		"/usr/bin/rg": "",
		"~/bin/rg":    "",
		"rg":          "has no '/'",
		"bin/rg":      "is relative",
		"~eve/bin":    "~user",
		"/usr/bin/[":  "not a valid glob",
		"/**":         "almost every executable",
		"":            "empty",
	} {
		got := LintPattern(p)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("LintPattern(%q) = %q, want containing %q", p, got, want)
		}
	}
}

func TestDangerousEnv(t *testing.T) {
	for _, n := range []string{"LD_PRELOAD", "ld_preload", "DYLD_INSERT_LIBRARIES", "BASH_ENV", "ENV", "PATH", "GIT_SSH_COMMAND", "PS4", "SHELLOPTS", "NODE_OPTIONS", "PYTHONPATH", "BASH_FUNC_x%%", "EXECIGNORE", "FPATH", "BASH_LOADABLES_PATH", "CDPATH", "", "A=B"} {
		if !DangerousEnv(n) {
			t.Errorf("DangerousEnv(%q) = false", n)
		}
	}
	for _, n := range []string{"FOO", "LANG", "TERM", "RUST_LOG", "CI"} {
		if DangerousEnv(n) {
			t.Errorf("DangerousEnv(%q) = true", n)
		}
	}
}

func TestCanMatch(t *testing.T) {
	for p, want := range map[string]bool{"/usr/bin/rg": true, "~/bin/*": true, "~": true, "rg": false, "bin/rg": false, "~eve/x": false, "/usr/[": false, "": false} {
		if got := CanMatch(p); got != want {
			t.Errorf("CanMatch(%q) = %v, want %v", p, got, want)
		}
	}
}

// TestShellStartupEnv checks the list, the BASH prefix and the promised
// case-insensitivity (a platform that folds case must not let bash_env or
// Ifs through), and that ordinary names pass.
func TestShellStartupEnv(t *testing.T) {
	for _, n := range []string{"BASH_ENV", "ENV", "CDPATH", "BASHOPTS", "BASH_FUNC_f%%", "EXECIGNORE",
		"bash_env", "Bash_Func_f%%", "env", "Ifs", "zdotdir", "prompt_command", "bAsHoPtS"} {
		if !ShellStartupEnv(n) {
			t.Errorf("ShellStartupEnv(%q) = false", n)
		}
	}
	for _, n := range []string{"HOME", "PATH", "LANG", "DISPLAY", "home", "envoy", "XBASH"} {
		if ShellStartupEnv(n) {
			t.Errorf("ShellStartupEnv(%q) = true", n)
		}
	}
}

// TestEnumListsImmutable: a caller that writes into a returned list (or
// appends to it) changes neither what Parse accepts nor the next list.
func TestEnumListsImmutable(t *testing.T) {
	h := Hosts()
	h[0] = "evil"
	_ = append(h[:1], "evil2")
	if _, err := ParseHost("evil"); err == nil {
		t.Error(`ParseHost("evil") accepted after writing into Hosts()`)
	}
	if got := Hosts(); got[0] != HostSandbox || len(got) != 3 {
		t.Errorf("Hosts() = %v after a caller wrote into its copy", got)
	}
	s := Securities()
	s[0] = SecurityFull
	if Securities()[0] != SecurityDeny {
		t.Error("Securities() shares its backing array")
	}
	a := Approvals()
	a[2] = AllowAlways
	if v, err := ParseApproval("deny"); err != nil || v != Reject {
		t.Errorf(`ParseApproval("deny") = %v, %v after writing into Approvals()`, v, err)
	}
	as, fb := Asks(), Fallbacks()
	as[0], fb[0] = "x", "x"
	if Asks()[0] != AskOff || Fallbacks()[0] != FallbackDeny {
		t.Error("Asks() or Fallbacks() shares its backing array")
	}
}
