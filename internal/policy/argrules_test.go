package policy

import "testing"

func TestArgRuleMatching(t *testing.T) {
	push := ArgRule{Pattern: "/usr/bin/git", Args: []string{"push", "origin", "*"}}
	any := ArgRule{Pattern: "/usr/bin/go", Args: []string{"test", "**"}}
	force := ArgRule{Pattern: "/usr/bin/git", Args: []string{"push", "--force"}, Deny: true}
	tests := []struct {
		r       ArgRule
		path    string
		args    []string
		dynamic []bool
		want    bool
	}{
		{push, "/usr/bin/git", []string{"push", "origin", "main"}, nil, true},
		{push, "/usr/bin/git", []string{"push", "origin", "main", "-f"}, nil, false},
		{push, "/usr/bin/git", []string{"push", "origin"}, nil, false},
		{push, "/usr/bin/gitx", []string{"push", "origin", "main"}, nil, false},
		{push, "/usr/bin/git", []string{"push", "origin", "$B"}, []bool{false, false, true}, false}, // unknown: may be several words
		{any, "/usr/bin/go", []string{"test"}, nil, true},
		{any, "/usr/bin/go", []string{"test", "./...", "-run", "X"}, nil, true},
		{any, "/usr/bin/go", []string{"test", "$(x)"}, []bool{false, true}, false},
		{any, "/usr/bin/go", []string{"build"}, nil, false},
		{force, "/usr/bin/git", []string{"push", "origin", "main", "--force"}, nil, true},
		{force, "/usr/bin/git", []string{"--force", "push"}, nil, false},
		{force, "/usr/bin/git", []string{"push", "origin"}, nil, false},
		{force, "/usr/bin/git", []string{"push", "$F"}, []bool{false, true}, true}, // unknown: may be --force
		{force, "/usr/bin/git", []string{"$C", "x"}, []bool{true, false}, true},
		{force, "/usr/bin/git", []string{"status"}, nil, false},
		{force, "/usr/bin/GIT", []string{"push", "--force"}, nil, true},        // deny: case ignored, fails closed
		{push, "/usr/bin/GIT", []string{"push", "origin", "main"}, nil, false}, // allow: a fold-only match is refused
	}
	for _, tt := range tests {
		if got := tt.r.Matches(tt.path, tt.args, tt.dynamic, ""); got != tt.want {
			t.Errorf("%s on %s %q (dynamic %v) = %v, want %v", tt.r, tt.path, tt.args, tt.dynamic, got, tt.want)
		}
	}
}

func TestMatchWord(t *testing.T) {
	for _, c := range []struct {
		glob, word string
		want       bool
	}{
		{"*", "", true}, {"*", "a/b", true}, {"a*c", "abbc", true}, {"a*c", "abcd", false},
		{"?", "x", true}, {"?", "", false}, {"-F", "-f", false}, {"*.go", "x/y.go", true}, {"a**b", "ab", true},
	} {
		if got := MatchWord(c.glob, c.word); got != c.want {
			t.Errorf("MatchWord(%q, %q) = %v", c.glob, c.word, got)
		}
	}
}

func TestPermitDenyWinsOverPathEntry(t *testing.T) {
	list := CompileAllowlist([]string{"/usr/bin/git"}, "")
	rules := CompileArgRules([]ArgRule{{Pattern: "/usr/bin/git", Args: []string{"push", "--force"}, Deny: true}}, "")
	if by, deny := Permit(list, rules, "/usr/bin/git", []string{"push", "--force"}, nil); by != "" || deny == "" {
		t.Errorf("Permit = %q, %q; the deny rule must win", by, deny)
	}
	if by, _ := Permit(list, nil, "/usr/bin/git", []string{"push", "--force"}, nil); by != "/usr/bin/git" {
		t.Errorf("control: without the rule the path entry allows it, got %q", by)
	}
}
