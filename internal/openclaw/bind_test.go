package openclaw

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
)

// TestScriptOperand: the file each interpreter reads its program from,
// past its options; none for inline code, a module or stdin.
func TestScriptOperand(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"sh", "x.sh", "a"}, "x.sh"},
		{[]string{"bash", "-e", "-o", "pipefail", "x.sh"}, "x.sh"},
		{[]string{"bash", "-ec", "echo"}, ""},
		{[]string{"dash", "--", "-x.sh"}, "-x.sh"},
		{[]string{"sh", "-"}, "-"},
		{[]string{"python3", "-u", "-W", "ignore", "run.py"}, "run.py"},
		{[]string{"python3.12", "-m", "http.server"}, ""},
		{[]string{"python3", "-c", "print(1)"}, ""},
		{[]string{"node", "--require", "./hook.js", "app.js"}, "app.js"},
		{[]string{"node", "-e", "1"}, ""},
		{[]string{"node", "--eval=1"}, ""},
		{[]string{"perl", "-I", "lib", "-w", "x.pl"}, "x.pl"},
		{[]string{"perl", "-we", "print 1"}, ""},
		{[]string{"ruby", "-r", "json", "x.rb"}, "x.rb"},
		{[]string{"ruby", "-e", "p 1"}, ""},
		{[]string{"echo", "x.sh"}, ""},
	} {
		if got := scriptOperand(interpreterKind(tc.argv[0]), tc.argv[1:]); got != tc.want {
			t.Errorf("%q: operand %q, want %q", tc.argv, got, tc.want)
		}
	}
}

// TestBindFilesNoticesChange: a bound script's content, a symlink swapped
// to another file, and a missing script created later are all changes;
// an untouched file is not.
func TestBindFilesNoticesChange(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.sh"), filepath.Join(dir, "b.sh")
	link := filepath.Join(dir, "link.sh")
	for _, f := range []string{a, b} {
		if err := os.WriteFile(f, []byte("echo same\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	bound := bindFiles([]Program{
		{Argv: []string{"sh", "a.sh"}, Path: "/bin/sh"},
		{Argv: []string{"sh", "link.sh"}},
		{Argv: []string{"python3", "missing.py"}},
	}, dir)
	if len(bound) != 4 {
		t.Fatalf("bound %+v", bound)
	}
	if c := changed(bound); c != nil {
		t.Fatalf("nothing changed, got %v", c)
	}
	// Same content, other file: the symlink now points at b.
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(b, link); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(a, []byte("echo other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "missing.py"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{"script " + a, "script " + link, "script " + filepath.Join(dir, "missing.py")}
	got := changed(bound)
	if len(got) != len(want) {
		t.Fatalf("changed %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("changed[%d] = %q, want %q", i, got[i], want[i])
		}
	}
}

// TestPrompterRechecksBoundFiles: a file changed after systemRun's check
// (while the engine analysed the command) is still caught when the engine
// asks and the gateway's approval would answer: the answer is reject.
func TestPrompterRechecksBoundFiles(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "x.sh")
	if err := os.WriteFile(script, []byte("echo GOOD\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n := newTestNode(t, Options{StateDir: dir, GatewayApprovals: true})
	a := &gatewayApproval{decision: policy.AllowOnce, id: "a1", plan: preparedPlan{hash: "h", cwd: dir,
		bound: bindFiles([]Program{{Argv: []string{"sh", "x.sh"}}}, dir)}}
	ctx := withGatewayApproval(context.Background(), a)
	req := prompt.Request{PlanHash: "h", Cwd: dir, Choices: []string{string(policy.AllowOnce), string(policy.Reject)}}
	p := n.ApprovalPrompter(nil)
	if d, _, err := p.Prompt(ctx, req); err != nil || d != policy.AllowOnce {
		t.Fatalf("unchanged: %v %v", d, err)
	}
	if err := os.WriteFile(script, []byte("echo EVIL\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, by, err := p.Prompt(ctx, req)
	if err != nil || d != policy.Reject || !strings.Contains(by, ErrOperandChanged.Error()) {
		t.Fatalf("changed: %v %q %v", d, by, err)
	}
}
