package jail

import (
	"testing"

	"github.com/exechost/exechost/internal/confine"
)

func TestSmoke(t *testing.T) {
	dir := t.TempDir()
	j := jailFor(t, confine.Confinement{Writable: []string{dir}, Network: confine.NetworkNone}, nil)
	t.Logf("held %v warning %q", j.Held(), j.Warning())
	r := sh(t, j, dir, "echo hi; id; grep Cap /proc/self/status; ls /proc | head; echo x > f && cat f; touch /etc/x; ls /run")
	t.Logf("code %d\nout %s\nerr %s", r.code(), r.stdout, r.stderr)
}
