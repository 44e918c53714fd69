package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/sandbox/pick"
	"github.com/exechost/exechost/internal/testdep"
)

func TestSandboxDoctor(t *testing.T) {
	testdep.Bwrap(t, false)
	dir := t.TempDir()
	noSock := "unix://" + filepath.Join(dir, "none.sock")
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	auto := write("auto.json", `{"sandbox": {"docker": {"host": "`+noSock+`"}}}`)
	dockerOnly := write("docker.json", `{"sandbox": {"backend": "docker", "docker": {"host": "`+noSock+`"}}}`)
	bad := write("bad.json", `{"sandbox": {"scope": "galaxy"}}`)

	run := func(args ...string) (string, int) {
		var out, errb bytes.Buffer
		root := NewRoot(&out, &errb)
		root.SetArgs(append([]string{"--state-dir", dir}, args...))
		if err := root.Execute(); err != nil {
			return out.String() + errb.String() + err.Error(), 1
		}
		return out.String() + errb.String(), 0
	}

	out, code := run("sandbox", "doctor", "--json", "--config", auto)
	var d pick.Diagnosis
	if err := json.Unmarshal([]byte(out), &d); err != nil || code != 0 {
		t.Fatalf("doctor --json: code %d, %v\n%s", code, err, out)
	}
	if d.Selected != "bwrap" || d.Backends[0].Available {
		t.Errorf("diagnosis = %+v, want bwrap selected and docker unavailable", d)
	}

	out, code = run("sandbox", "doctor", "--config", auto)
	if code != 0 || !strings.Contains(out, "would use: bwrap") || !strings.Contains(out, "docker: unavailable") {
		t.Errorf("doctor text output (code %d):\n%s", code, out)
	}

	if out, code = run("sandbox", "doctor", "--config", dockerOnly); code != 1 {
		t.Errorf("doctor with a dead docker configured: code %d, want 1\n%s", code, out)
	}
	if out, code = run("sandbox", "doctor", "--config", bad); code != 1 || !strings.Contains(out, "galaxy") {
		t.Errorf("doctor with a bad config: code %d\n%s", code, out)
	}
}
