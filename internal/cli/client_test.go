package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/testproc"
)

// TestSilentGatewayTimesOut: a gateway that accepts the connection but
// never answers exits 124 (a timeout, docs/cli.md) once the client's
// connect deadline passes — injected short here — with a message saying
// what was seen; with --json, one JSON object says the same.
func TestSilentGatewayTimesOut(t *testing.T) {
	t.Setenv(EnvGatewayToken, "some-token")
	url := testproc.SilentListener(t)
	short := func(g *globals) { g.connectTimeout = 200 * time.Millisecond }
	dir := t.TempDir()
	for _, args := range [][]string{
		{"nodes", "list", "--gateway", url},
		{"exec", "--gateway", url, "true"},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"--state-dir", dir}, args...), &out, &errb, short)
		if code != ExitTimeout || !strings.Contains(errb.String(), "no answer from the gateway at "+url+" within 200ms") {
			t.Errorf("%v: exit %d, want %d with the reason\nstderr: %s", args, code, ExitTimeout, errb.String())
		}
	}
	var out, errb bytes.Buffer
	code := run([]string{"--state-dir", dir, "exec", "--json", "--gateway", url, "true"}, &out, &errb, short)
	var obj struct {
		OK       bool   `json:"ok"`
		Code     string `json:"code"`
		ExitCode int    `json:"exitCode"`
	}
	if err := json.Unmarshal(out.Bytes(), &obj); err != nil || code != ExitTimeout || obj.OK || obj.Code != "TIMEOUT" || obj.ExitCode != ExitTimeout {
		t.Errorf("exec --json: exit %d, stdout %q (%v), want one object with exitCode %d", code, out.String(), err, ExitTimeout)
	}
}
