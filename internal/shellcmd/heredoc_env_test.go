package shellcmd

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestHeredocDelimiterQuoting: a delimiter that mixes quoted and unquoted
// parts is literal to every shell but expanded by the interpreter, so the
// analysis refuses it; a wholly quoted one stays literal, and an unquoted
// one's body is analysed.
func TestHeredocDelimiterQuoting(t *testing.T) {
	f := newFixture(t)
	for _, text := range []string{
		"cat <<'A'B\n$(rm x)\nAB", "cat <<\"E\"OF\n$(rm x)\nEOF", "cat <<''EOF\n$(rm x)\nEOF",
		"cat <<-'A'B\n\t$(rm x)\n\tAB", "cat <<E\\OF\n$(rm x)\nEOF", "cat <<'E'\"OF\"x\n`rm x`\nEOFx",
		"cat <<E''\nhi\nE",
	} {
		if a := Analyze(text, f.env); a.OK || !strings.Contains(a.Error, "here-document") {
			t.Errorf("%q: OK=%v error %q; want a here-document refusal", text, a.OK, a.Error)
		}
	}
	for _, text := range []string{"cat <<'EOF'\n$(rm x)\nEOF", "cat <<\\EOF\n$(rm x)\nEOF", "cat <<\"EOF\"\n`rm x`\nEOF"} {
		if a := Analyze(text, f.env); !a.OK {
			t.Errorf("%q (literal body): %s", text, a.Error)
		}
	}
	if a := Analyze("cat <<EOF\n$(rm x)\nEOF", f.env); a.OK || !strings.Contains(a.Error, "command substitution") {
		t.Errorf("unquoted delimiter: OK=%v error %q; want the body's substitution refused", a.OK, a.Error)
	}
}

// TestAnalysisEnv: the analysis lists every variable the command puts in
// a program's environment, so the host can hold each against the policy.
func TestAnalysisEnv(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		text string
		want []string
	}{
		{"ls", nil},
		{"A=1 ls", []string{"A"}},
		{"export B=2 C; ls", []string{"B", "C"}},
		{"env D=1 E=2 ls", []string{"D", "E"}},
		{"x=1; ls", nil},
		{"set -a; x=1; ls", []string{"x"}},
		{"set -o allexport; for v in a; do ls; done", []string{"v"}},
		{"sh -c 'F=1 ls'", []string{"F"}},
		{"readonly G=1; ls", nil},
	}
	for _, tt := range tests {
		a := Analyze(tt.text, f.env)
		if !a.OK {
			t.Errorf("%q: %s", tt.text, a.Error)
			continue
		}
		if diff := cmp.Diff(tt.want, a.Env); diff != "" {
			t.Errorf("%q: Env (-want +got):\n%s", tt.text, diff)
		}
	}
}
