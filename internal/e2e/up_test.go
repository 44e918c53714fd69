package e2e

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestUp starts `exechost up` on a fresh state directory, runs a command
// through it on the auto-paired local node, and stops it with Ctrl-C.
func TestUp(t *testing.T) {
	dir := newStateDir(t, "up")
	p := start(t, dir, "up", "--listen", "127.0.0.1:0", "--web", "127.0.0.1:0")
	re := regexp.MustCompile(`gateway\s+(ws://[0-9.:]+)`)
	waitFor(t, "up to print what to run next", func() bool {
		return strings.Contains(p.Out.String(), "Next, in another terminal") || isDone(p)
	})
	m := re.FindStringSubmatch(p.Out.String())
	if m == nil {
		t.Fatalf("no gateway URL in the output:\n%s", p.Out)
	}
	url := m[1]
	for _, want := range []string{"(paired, this machine)", "security=allowlist ask=on-miss askFallback=deny", "exec --gateway " + url} {
		if !strings.Contains(p.Out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, p.Out)
		}
	}
	if r := run(t, dir, "approvals", "allowlist", "add", "/usr/bin/true"); r.code != 0 {
		t.Fatalf("allowlist add: %s", r)
	}
	r := run(t, dir, "exec", "--gateway", url, "--json", "/usr/bin/true")
	if r.code != 0 || !strings.Contains(r.stdout, `"host": "node"`) {
		t.Fatalf("exec through up: %s", r)
	}
	p.signal(os.Interrupt)
	if err := p.wait(t, "up after Ctrl-C"); err != nil {
		t.Fatalf("up exited with %v after Ctrl-C:\n%s", err, p.Out)
	}
	if !strings.Contains(p.Out.String(), "exechost: stopped") {
		t.Errorf("no clean stop message:\n%s", p.Out)
	}
}

func isDone(p *proc) bool {
	select {
	case <-p.Done():
		return true
	default:
		return false
	}
}
