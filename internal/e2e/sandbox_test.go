package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/testdep"
)

// TestSandboxRouting runs host=sandbox through the daemonless backend: the
// command runs in the sandbox, and a sandbox that cannot run is an error,
// never a run on the host.
func TestSandboxRouting(t *testing.T) {
	testdep.Binary(t, "bwrap")
	c := newCluster(t, `{
		"tools": {"exec": {"host": "sandbox"}},
		"gateway": {"listen": "127.0.0.1:0"},
		"sandbox": {"backend": "bwrap"},
	}`)
	if strings.Contains(c.gw.Out.String(), "host=sandbox unavailable") {
		testdep.Missing(t, "bwrap sandbox", "the bwrap backend does not work on this kernel: "+c.gw.Out.String())
	}
	// A file the host has under the gateway's state directory is not
	// visible in the sandbox.
	marker := filepath.Join(c.gwDir, "exechost.json")
	res, r := c.execJSON("--session", "sb", "test -e "+marker+" && echo on-host || echo in-sandbox")
	if r.code != 0 || res.Host != "sandbox" || res.Stdout != "in-sandbox\n" {
		t.Fatalf("exec host=sandbox: %+v\n%s", res, r)
	}
	if evs := c.events("sb"); len(evs) != 0 {
		t.Errorf("events not delivered with the response: %q", evs)
	}
	if !hasPrefix(texts(res.Events), "Exec finished (node=sandbox, id="+res.RunID+", code=0)") {
		t.Errorf("events = %q", texts(res.Events))
	}
	// The session's first sandbox command says how its commands run.
	if !hasPrefix(texts(res.Events), "Sandbox bwrap (id="+res.RunID+"): commands: resident agent: ") {
		t.Errorf("events = %q, want the sandbox's path", texts(res.Events))
	}
}
