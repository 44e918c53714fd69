package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/docker/dockertest"
	"github.com/exechost/exechost/internal/session"
)

// TestSandboxDockerSaysItsPath: the gateway's own exechost binary — built
// here as `go build` builds it, dynamically linked where a C compiler is
// installed — runs as the Docker sandbox's resident agent (its loader
// carried into an image without a C library), and a session's first
// sandbox command says which path its commands take, once: an
// exec.sandbox system event (one [event] line in the CLI) and a log line.
func TestSandboxDockerSaysItsPath(t *testing.T) {
	image := dockertest.BuildImage(t, dockertest.Client(t))
	want := sandbox.BinaryStatic
	if dockertest.Dynamic(t, bin) {
		want = sandbox.BinaryCarriedLoader
	}
	t.Logf("the gateway's binary, the agent: %s", want)
	c := newCluster(t, fmt.Sprintf(`{
		"tools": {"exec": {"host": "sandbox"}},
		"gateway": {"listen": "127.0.0.1:0"},
		"sandbox": {"backend": "docker", "docker": {"image": %q}},
	}`, image))
	if strings.Contains(c.gw.Out.String(), "host=sandbox unavailable") {
		t.Fatalf("the gateway did not open the docker backend:\n%s", c.gw.Out.String())
	}
	r := c.cli("exec", "--session", "dk", "echo first")
	line := "[event] Sandbox docker (id="
	if r.code != 0 || r.stdout != "first\n" || strings.Count(r.stderr, line) != 1 || !strings.Contains(r.stderr, "commands: resident agent ("+want+")") {
		t.Fatalf("first sandbox command of the session: want one line saying the resident agent (%s):\n%s", want, r)
	}
	if r := c.cli("exec", "--session", "dk", "echo again"); r.code != 0 || strings.Contains(r.stderr, "Sandbox docker") {
		t.Errorf("the second command of the session said the path again:\n%s", r)
	}
	// Another session is told too, as a structured event of its run.
	res, r := c.execJSON("--session", "dk2", "echo other")
	var ev []string
	for _, e := range res.Events {
		if e.Kind == session.KindSandbox && e.RunID == res.RunID {
			ev = append(ev, e.Text)
		}
	}
	if r.code != 0 || len(ev) != 1 {
		t.Errorf("exec --json in a new session: %d %s events, want 1\n%s", len(ev), session.KindSandbox, r)
	}
	if out := c.gw.Out.String(); !strings.Contains(out, "sandbox commands") || !strings.Contains(out, "binary="+want) {
		t.Errorf("the gateway did not log the path:\n%s", out)
	}
}
