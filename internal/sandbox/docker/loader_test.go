package docker

import (
	"debug/elf"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/sandbox/docker/dockertest"
)

func TestLdSoConfFollowsIncludes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("ld.so.conf", "# comment\n/opt/a/lib/\ninclude ld.so.conf.d/*.conf\n/opt/b # trailing\n")
	write("ld.so.conf.d/1.conf", "/usr/local/lib\n")
	write("ld.so.conf.d/2.conf", "include ../loop.conf\n/x86 /y86\n")
	write("loop.conf", "include ld.so.conf\n")
	// The include loop ends at a fixed depth (its directories repeat;
	// systemLibDirs drops repeats).
	got := ldSoConf(filepath.Join(dir, "ld.so.conf"), 0)
	if len(got) < 2 || !cmp.Equal(got[:2], []string{"/opt/a/lib", "/usr/local/lib"}) {
		t.Errorf("dirs = %v, want /opt/a/lib, then the include's /usr/local/lib", got)
	}
	for _, want := range []string{"/opt/a/lib", "/usr/local/lib", "/x86", "/y86", "/opt/b"} {
		found := false
		for _, d := range got {
			found = found || d == want
		}
		if !found {
			t.Errorf("%s missing from %v", want, got)
		}
	}
}

// TestResolveRuntime resolves a real dynamically linked exechost: its
// loader and every library it needs, transitively, as host files.
func TestResolveRuntime(t *testing.T) {
	if _, err := resolveRuntime(dockertest.AgentBinary(t)); !errors.Is(err, errStatic) {
		t.Errorf("static binary: %v, want errStatic", err)
	}
	bin := dockertest.DynamicAgentBinary(t)
	rt, err := resolveRuntime(bin)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rt.Libs["libc.so.6"]; !ok {
		t.Errorf("libs = %v, want libc.so.6 among them", rt.Libs)
	}
	for name, path := range rt.files() {
		f, err := elf.Open(path)
		if err != nil {
			t.Errorf("%s → %s: %v", name, path, err)
			continue
		}
		f.Close()
		if strings.Contains(name, "/") {
			t.Errorf("mounted name %q has a slash", name)
		}
	}
	if got := rt.entrypoint(); got[0] != libMount+"/"+rt.InterpName || got[len(got)-1] != agentMount {
		t.Errorf("entrypoint = %v", got)
	}
}

func TestSplitPathExpandsOrigin(t *testing.T) {
	got := splitPath([]string{"$ORIGIN/../lib:/opt/x", "${ORIGIN}"}, "/app/bin/exechost")
	if diff := cmp.Diff([]string{"/app/bin/../lib", "/opt/x", "/app/bin"}, got); diff != "" {
		t.Errorf("splitPath (-want +got):\n%s", diff)
	}
}
