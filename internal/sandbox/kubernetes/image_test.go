package kubernetes

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/sandbox/docker/dockertest"
	"github.com/exechost/exechost/internal/testdep"
	"github.com/exechost/exechost/internal/testproc"
)

// TestAgentImageBuild: the image is the static binary alone, the same
// bytes for the same binary, and a dynamically linked binary (which would
// not run FROM scratch) is refused.
func TestAgentImageBuild(t *testing.T) {
	bin := dockertest.AgentBinary(t)
	a, err := BuildAgentImage(bin)
	if err != nil {
		t.Fatal(err)
	}
	b, err := BuildAgentImage(bin)
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest() != b.Digest() || !bytes.Equal(a.Layer, b.Layer) {
		t.Errorf("two builds of one binary differ: %s vs %s", a.Digest(), b.Digest())
	}
	if !bytes.Contains(a.Config, []byte(`"Entrypoint":["/exechost"]`)) || a.Arch == "" {
		t.Errorf("config = %s", a.Config)
	}
	// The control: the system's own dynamically linked true(1).
	if _, err := BuildAgentImage(testdep.Binary(t, "true")); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("a dynamic binary: %v, want it refused", err)
	}
}

// TestAgentImageLoadsAndRuns: the archive loads into a real Docker and
// the image runs the agent binary as its entrypoint, FROM scratch.
func TestAgentImageLoadsAndRuns(t *testing.T) {
	dockertest.Client(t)
	im, err := BuildAgentImage(dockertest.AgentBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	ref := "exechost.test/agent-archive:" + strings.TrimPrefix(im.Digest(), "sha256:")[:12]
	path := filepath.Join(t.TempDir(), "agent.tar")
	var buf bytes.Buffer
	if err := im.WriteArchive(&buf, ref); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("docker", "load", "-i", path).CombinedOutput(); err != nil {
		t.Fatalf("docker load: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", ref).Run() })
	runsVersion(t, ref)
}

// TestAgentImagePush pushes to a real registry (Debian's docker-registry,
// the CNCF distribution registry) on loopback, then pulls the tag back
// with Docker and runs it.
func TestAgentImagePush(t *testing.T) {
	reg := startRegistry(t)
	dockertest.Client(t)
	im, err := BuildAgentImage(dockertest.AgentBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	ref := reg + "/exechost-agent:test"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, err := im.Push(ctx, ref, PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodHead, "http://"+reg+"/v2/exechost-agent/manifests/test", nil)
	req.Header.Set("Accept", mediaManifest)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Docker-Content-Digest"); got != d || d != im.Digest() {
		t.Errorf("registry has %s under the tag, pushed %s (image %s)", got, d, im.Digest())
	}
	// A second push finds the blobs there and only puts the manifest.
	if _, err := im.Push(ctx, ref, PushOptions{}); err != nil {
		t.Errorf("second push: %v", err)
	}
	if out, err := exec.Command("docker", "pull", ref).CombinedOutput(); err != nil {
		t.Fatalf("docker pull: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", ref).Run() })
	runsVersion(t, ref)

	if _, err := im.Push(ctx, "exechost-agent:test", PushOptions{}); err == nil || !strings.Contains(err.Error(), "names no registry") {
		t.Errorf("a reference without a registry: %v", err)
	}
}

// runsVersion runs `exechost version` as the image's entrypoint.
func runsVersion(t *testing.T, ref string) {
	t.Helper()
	out, err := exec.Command("docker", "run", "--rm", "--network", "none", ref, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "exechost") {
		t.Fatalf("docker run %s version: %v\n%s", ref, err, out)
	}
}

// startRegistry runs docker-registry on a free loopback port with its
// storage in a temporary directory, and returns host:port.
func startRegistry(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		testdep.Missing(t, "docker-registry", "the image push test needs a real registry (apt-get install docker-registry)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n", filepath.Join(dir, "data"), addr), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", cfg)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	testproc.Poll(t, 30*time.Second, "the registry answers", func() bool {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return addr
}
