// Package dockertest provides what the docker sandbox tests need from a
// real daemon: a client that reports a missing daemon through testdep, and
// a tiny test image built FROM scratch with a static busybox, so the tests
// need no registry.
package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/exechost/exechost/internal/testdep"
	"github.com/exechost/exechost/internal/testproc"
)

// Image is the tag of the test image.
const Image = "exechost-sandbox-test:busybox"

// LockedTmpImage is the tag of the test image whose /tmp is root's, mode
// 0755: docker copies that mode onto the tmpfs it mounts there, so the
// sandbox user cannot write /tmp (as in some real images).
const LockedTmpImage = "exechost-sandbox-test:busybox-locked-tmp"

// labelDigest records what the image was built from, so a changed busybox
// or Dockerfile rebuilds it and an unchanged one is reused.
const labelDigest = "exechost.testimage.digest"

// dockerfile copies a root filesystem holding busybox and its applet
// symlinks; there is no RUN step, so building starts no container.
const dockerfile = `FROM scratch
COPY rootfs/ /
CMD ["/bin/sh"]
`

// fallbackApplets is used when `busybox --list` cannot run.
var fallbackApplets = []string{
	"sh", "ash", "cat", "echo", "sleep", "kill", "rm", "id", "touch", "mkdir",
	"ls", "ps", "head", "dd", "yes", "true", "false", "env", "pwd", "seq",
	"wc", "stat", "grep", "ip", "ifconfig", "pgrep", "pkill", "tr", "sed",
}

// Client returns a client for the local daemon, or reports the daemon
// missing (a skip, or a failure under CI=true).
func Client(t testing.TB) *client.Client {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		testdep.Missing(t, "dockerd", "the Engine API does not answer ("+err.Error()+"); run scripts/provision-docker.sh")
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// BuildImage builds the busybox test image and tags it Image, unless an
// image built from the same inputs already has that tag.
func BuildImage(t testing.TB, cli *client.Client) string {
	t.Helper()
	return buildImage(t, cli, Image, 0o1777)
}

// BuildLockedTmpImage builds LockedTmpImage (see there) like BuildImage.
func BuildLockedTmpImage(t testing.TB, cli *client.Client) string {
	t.Helper()
	return buildImage(t, cli, LockedTmpImage, 0o755)
}

func buildImage(t testing.TB, cli *client.Client, tag string, tmpMode int64) string {
	t.Helper()
	busybox := findBusybox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	buildCtx, digest, err := Context(busybox, tmpMode)
	if err != nil {
		t.Fatalf("build context: %v", err)
	}
	if ins, err := cli.ImageInspect(ctx, tag); err == nil && ins.Config != nil && ins.Config.Labels[labelDigest] == digest {
		return tag
	}
	res, err := cli.ImageBuild(ctx, bytes.NewReader(buildCtx), client.ImageBuildOptions{
		Tags:        []string{tag},
		Remove:      true,
		ForceRemove: true,
		Labels:      map[string]string{labelDigest: digest},
	})
	if err != nil {
		t.Fatalf("build test image: %v", err)
	}
	defer res.Body.Close()
	if err := readBuildLog(res.Body); err != nil {
		t.Fatalf("build test image: %v", err)
	}
	return tag
}

// readBuildLog drains the JSON message stream of a build and returns the
// first error message in it.
func readBuildLog(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var m struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read build output: %w", err)
		}
		if m.Error != "" {
			return errors.New(m.Error)
		}
	}
}

func findBusybox(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return testdep.Binary(t, "busybox")
}

// Context returns a tar build context holding the Dockerfile, busybox at
// rootfs/bin/busybox with a symlink per applet, a passwd/group naming
// nobody (65534) and /tmp with tmpMode, plus a digest of all of it.
// busybox must be statically linked (Debian's busybox-static), since the
// image has no libc.
func Context(busybox string, tmpMode int64) ([]byte, string, error) {
	bin, err := os.ReadFile(busybox)
	if err != nil {
		return nil, "", fmt.Errorf("read busybox: %w", err)
	}
	applets := fallbackApplets
	if out, err := exec.Command(busybox, "--list").Output(); err == nil {
		applets = strings.Fields(string(out))
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, body []byte) error {
		h.ModTime = time.Unix(0, 0)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	files := []struct {
		name string
		mode int64
		body []byte
	}{
		{"Dockerfile", 0o644, []byte(dockerfile)},
		{"rootfs/bin/busybox", 0o755, bin},
		{"rootfs/etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n")},
		{"rootfs/etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n")},
	}
	for _, d := range []string{"rootfs/", "rootfs/bin/", "rootfs/etc/", "rootfs/workspace/"} {
		if err := add(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755}, nil); err != nil {
			return nil, "", err
		}
	}
	// /tmp is world-writable and sticky (1777) in most real images;
	// docker copies the mode onto the tmpfs it mounts there.
	if err := add(&tar.Header{Name: "rootfs/tmp/", Typeflag: tar.TypeDir, Mode: tmpMode}, nil); err != nil {
		return nil, "", err
	}
	for _, f := range files {
		if err := add(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: f.mode, Size: int64(len(f.body))}, f.body); err != nil {
			return nil, "", err
		}
	}
	for _, a := range applets {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		if err := add(&tar.Header{Name: "rootfs/bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777}, nil); err != nil {
			return nil, "", err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(buf.Bytes())
	return buf.Bytes(), hex.EncodeToString(sum[:12]), nil
}

// agentBuild and dynamicBuild are the exechost binaries AgentBinary and
// DynamicAgentBinary build, once per test process.
var agentBuild, dynamicBuild build

type build struct {
	once sync.Once
	path string
	err  error
}

// AgentBinary returns a statically linked exechost binary (CGO_ENABLED=0,
// as released) to run as the sandbox agent inside the test image, which
// has no C library; test binaries themselves link it dynamically. It is
// built once per test process into a directory per checkout, kept between
// runs (the Go build cache makes a rebuild cheap).
func AgentBinary(t testing.TB) string {
	t.Helper()
	return agentBuild.get(t, "static", "0", "-trimpath")
}

// DynamicAgentBinary returns a dynamically linked exechost binary — what
// `go install` gives on a machine with a C compiler — checked to have a
// program interpreter; without a C compiler it reports gcc missing.
func DynamicAgentBinary(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		testdep.Missing(t, "gcc", "a dynamically linked exechost needs a C compiler to build")
	}
	// An external link always gives a dynamic executable, even when no
	// package of the build needs cgo.
	bin := dynamicBuild.get(t, "dynamic", "1", "-trimpath", "-ldflags=-linkmode=external")
	if !Dynamic(t, bin) {
		t.Fatalf("%s has no program interpreter: the build is not dynamically linked", bin)
	}
	return bin
}

// Dynamic reports whether the ELF executable at path is dynamically
// linked (has a program interpreter).
func Dynamic(t testing.TB, path string) bool {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}

func (b *build) get(t testing.TB, kind, cgo string, flags ...string) string {
	t.Helper()
	b.once.Do(func() {
		// One directory per checkout, so parallel test runs of different
		// trees never run each other's agent.
		wd, _ := os.Getwd()
		sum := sha256.Sum256([]byte(wd))
		dir := filepath.Join(os.TempDir(), "exechost-agent-test-"+hex.EncodeToString(sum[:6])+"-"+kind)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.err = err
			return
		}
		// Build in the environment of this (sequential) test binary.
		old, had := os.LookupEnv("CGO_ENABLED")
		os.Setenv("CGO_ENABLED", cgo)
		b.path, b.err = testproc.Build(dir, false, flags...)
		if had {
			os.Setenv("CGO_ENABLED", old)
		} else {
			os.Unsetenv("CGO_ENABLED")
		}
	})
	if b.err != nil {
		t.Fatalf("build the %s agent binary: %v", kind, b.err)
	}
	return b.path
}
