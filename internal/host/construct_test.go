package host

import (
	"testing"

	"github.com/exechost/exechost/internal/shellcmd"
)

// TestConstructOf reads the construct and its position from the
// analysis's fields, which every denial this host sends carries (the
// gateway does not analyse). The last cases are ones that splitting the
// message on " at " and " (hint:" got wrong: a comma after the position,
// " at " inside a quoted word, and a hint before the position.
func TestConstructOf(t *testing.T) {
	for _, tc := range []struct{ text, construct, pos string }{
		{"echo $(id)", "command substitution $(…)", "1:6"},
		{"git show > x", "redirection >x reads or writes a file (only /dev/null and descriptors such as 2>&1 are allowed)", "1:10"},
		{"eval ls", "eval runs its arguments as shell text", "1:1"},
		{"sh -c 'echo `id`'", "in sh -c payload: command substitution `…`", "1:6"},
		{"make test", "", ""},
		{"for PATH in /tmp; do ls; done", "for loop assigns PATH, which changes what runs", "1:1"},
		{`sh -c "$x at 1:2"`, `run-time value "$x at 1:2" in the arguments of sh`, ""},
		{"export LD_PRELOAD=/tmp/x", "export LD_PRELOAD changes what runs", "1:1"},
	} {
		c, p := constructOf(shellcmd.Analyze(tc.text, shellcmd.Env{Cwd: "/", PATH: "/usr/bin:/bin"}))
		if c != tc.construct || p != tc.pos {
			t.Errorf("constructOf(%q) = %q, %q; want %q, %q", tc.text, c, p, tc.construct, tc.pos)
		}
	}
}
