package shellcmd

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFailureParts: an analysis that fails says what, where and the hint
// in fields, and its Error is exactly those parts in the message users
// read; builtins carry their position as fields too.
func TestFailureParts(t *testing.T) {
	env := Env{Cwd: "/", PATH: "/usr/bin:/bin"}
	for _, tc := range []struct {
		text string
		want Failure
		msg  string
	}{
		{"echo $(id)", Failure{What: "command substitution $(…)", Line: 1, Col: 6}, "command substitution $(…) at 1:6"},
		{"ls > x", Failure{What: "redirection >x", Line: 1, Col: 4, Detail: " reads or writes a file (only /dev/null and descriptors such as 2>&1 are allowed)"},
			"redirection >x at 1:4 reads or writes a file (only /dev/null and descriptors such as 2>&1 are allowed)"},
		{"eval ls", Failure{What: "eval runs its arguments as shell text", Line: 1, Col: 1, Hint: "run the commands it would run directly"},
			"eval runs its arguments as shell text at 1:1 (hint: run the commands it would run directly)"},
		{"sh -c 'true; eval ls'", Failure{What: "in sh -c payload: eval runs its arguments as shell text", Line: 1, Col: 7, Hint: "run the commands it would run directly"},
			"in sh -c payload: eval runs its arguments as shell text at 1:7 (hint: run the commands it would run directly)"},
		{"export LD_PRELOAD=/x", Failure{What: "export LD_PRELOAD changes what runs", Line: 1, Col: 1, Hint: "dangerous environment variables cannot be set in a command"},
			"export LD_PRELOAD changes what runs at 1:1 (hint: dangerous environment variables cannot be set in a command)"},
	} {
		a := Analyze(tc.text, env)
		if a.OK || a.Failure == nil {
			t.Errorf("Analyze(%q) = OK or no Failure: %+v", tc.text, a)
			continue
		}
		if diff := cmp.Diff(tc.want, *a.Failure); diff != "" {
			t.Errorf("Analyze(%q).Failure (-want +got):\n%s", tc.text, diff)
		}
		if a.Error != tc.msg || a.Failure.Error() != tc.msg {
			t.Errorf("Analyze(%q).Error = %q, Failure.Error() = %q; want %q", tc.text, a.Error, a.Failure.Error(), tc.msg)
		}
	}
	a := Analyze("cd /tmp && echo hi; sh -c 'pwd'", env)
	want := []Builtin{{Name: "cd", Line: 1, Col: 1}, {Name: "echo", Line: 1, Col: 12}, {Name: "pwd", Line: 1, Col: 1}}
	if diff := cmp.Diff(want, a.Builtins); diff != "" || !a.OK {
		t.Errorf("Builtins (-want +got):\n%s (analysis %+v)", diff, a)
	}
	if got := a.Builtins[1].String(); got != "echo at 1:12" {
		t.Errorf("Builtin.String() = %q", got)
	}
}
