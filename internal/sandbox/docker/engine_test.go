package docker

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
)

// TestEngineHosts: the daemon addresses the client accepts, as
// sandbox.docker.host or $DOCKER_HOST spell them, and a clear refusal of
// the rest.
func TestEngineHosts(t *testing.T) {
	t.Setenv("DOCKER_HOST", "")
	t.Setenv("DOCKER_CERT_PATH", "")
	t.Setenv("DOCKER_API_VERSION", "")
	for _, tc := range []struct {
		host, want, err string
	}{
		{host: "", want: defaultDockerHost},
		{host: "unix:///run/user/1000/docker.sock", want: "unix:///run/user/1000/docker.sock"},
		{host: "tcp://127.0.0.1:2375", want: "tcp://127.0.0.1:2375"},
		{host: "tcp://127.0.0.1", err: "missing port"},
		{host: "ssh://me@box", err: "hint: unix:// or tcp://"},
		{host: "/var/run/docker.sock", err: "want unix:///path"},
	} {
		e, err := newEngine(tc.host)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("newEngine(%q) = %v, want an error with %q", tc.host, err, tc.err)
			}
			continue
		}
		if err != nil || e.DaemonHost() != tc.want {
			t.Errorf("newEngine(%q) = %v, %v; want host %s", tc.host, e, err, tc.want)
		}
	}
	t.Setenv("DOCKER_HOST", "tcp://127.0.0.1:2376")
	if e, err := newEngine(""); err != nil || e.DaemonHost() != "tcp://127.0.0.1:2376" {
		t.Errorf("$DOCKER_HOST not used: %v %v", e, err)
	}
}

// fakeDaemon serves handler on a unix socket, standing in for dockerd
// where the answer to test is one the real daemon cannot be made to give
// (an old API version, a refusal).
func fakeDaemon(t *testing.T, handler http.HandlerFunc) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "unix://" + sock
}

// TestEngineNegotiatesAndMapsErrors: Ping lowers the API version to an
// older daemon's (unless $DOCKER_API_VERSION pins it) and refuses one
// older than the minimum; the daemon's 404 and 409 are told apart by
// status, with its message kept; no daemon at all is
// ErrDaemonUnreachable.
func TestEngineNegotiatesAndMapsErrors(t *testing.T) {
	t.Setenv("DOCKER_CERT_PATH", "")
	t.Setenv("DOCKER_API_VERSION", "")
	version := "1.43"
	var paths []string
	host := fakeDaemon(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", version)
		paths = append(paths, r.URL.Path)
		switch {
		case r.URL.Path == "/_ping":
			w.Write([]byte("OK"))
		case strings.HasSuffix(r.URL.Path, "/images/missing:1/json"):
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"message":"No such image: missing:1"}`))
		case strings.HasSuffix(r.URL.Path, "/exec"):
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"message":"container is not running"}`))
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	ctx := context.Background()
	e, err := NewClient(host)
	if err != nil {
		t.Fatal(err)
	}
	if err := Ping(ctx, e); err != nil {
		t.Fatal(err)
	}
	if e.ClientVersion() != "1.43" {
		t.Errorf("negotiated %s, want the daemon's 1.43", e.ClientVersion())
	}
	err = CheckImage(ctx, e, "missing:1")
	if !errors.Is(err, ErrImageMissing) {
		t.Errorf("CheckImage of a missing image = %v, want ErrImageMissing", err)
	}
	if _, err := e.ExecCreate(ctx, "c1", execReq()); !isConflict(err) || isNotFound(err) || !strings.Contains(err.Error(), "container is not running") {
		t.Errorf("ExecCreate on a stopped container = %v, want a conflict with the daemon's message", err)
	}
	if want := "/v1.43/images/missing:1/json"; !containsPath(paths, want) {
		t.Errorf("paths %v lack %s", paths, want)
	}

	t.Setenv("DOCKER_API_VERSION", "1.41")
	pinned, _ := NewClient(host)
	if err := Ping(ctx, pinned); err != nil || pinned.ClientVersion() != "1.41" {
		t.Errorf("pinned version: %v %s", err, pinned.ClientVersion())
	}
	t.Setenv("DOCKER_API_VERSION", "")

	version = "1.24"
	old, _ := NewClient(host)
	if err := Ping(ctx, old); err == nil || !strings.Contains(err.Error(), "at least "+minAPIVersion) {
		t.Errorf("Ping of a 1.24 daemon = %v, want a refusal", err)
	}

	gone, _ := NewClient("unix://" + filepath.Join(t.TempDir(), "none.sock"))
	if err := Ping(ctx, gone); !errors.Is(err, ErrDaemonUnreachable) {
		t.Errorf("Ping of no daemon = %v, want ErrDaemonUnreachable", err)
	}
	if err := gone.ContainerStart(ctx, "x"); !errors.Is(daemonError(err), ErrDaemonUnreachable) {
		t.Errorf("a call to no daemon = %v, want ErrDaemonUnreachable", daemonError(err))
	}
}

func containsPath(paths []string, p string) bool {
	for _, q := range paths {
		if q == p {
			return true
		}
	}
	return false
}

// TestVersionLess compares as numbers, not strings.
func TestVersionLess(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{{"1.9", "1.10", true}, {"1.41", "1.41", false}, {"1.52", "1.41", false}, {"1.40", "1.40.1", true}} {
		if got := versionLess(tc.a, tc.b); got != tc.want {
			t.Errorf("versionLess(%s, %s) = %v", tc.a, tc.b, got)
		}
	}
}

func execReq() execConfig { return execConfig{Cmd: []string{"true"}} }

// TestConfigMatchesMoby: the container configuration this backend sends
// encodes every field it sets exactly as moby's api types (what the
// daemon decodes) encode the same configuration.
func TestConfigMatchesMoby(t *testing.T) {
	pids := int64(64)
	ours := &containerConfig{
		Hostname: "sandbox", User: "65534:65534", AttachStdin: true, AttachStdout: true, AttachStderr: true,
		OpenStdin: true, StdinOnce: true, Cmd: []string{"--agent"}, Image: "img:1", WorkingDir: "/workspace",
		Entrypoint: []string{"/exechost"}, NetworkDisabled: true, Labels: map[string]string{"a": "b"},
		HostConfig: &hostConfig{
			Mounts:      []mountSpec{{Type: "bind", Source: "/w", Target: "/workspace"}, {Type: "bind", Source: "/bin/x", Target: "/exechost", ReadOnly: true}},
			NetworkMode: "none", ReadonlyRootfs: true, CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges"},
			Tmpfs: map[string]string{"/tmp": "rw"}, Memory: 1 << 30, MemorySwap: 1 << 30, NanoCPUs: 1500000000, PidsLimit: &pids,
		},
	}
	ours.HostConfig.RestartPolicy.Name = "no"
	ours.HostConfig.LogConfig.Type = "none"
	theirs := container.CreateRequest{
		Config: &container.Config{
			Hostname: "sandbox", User: "65534:65534", AttachStdin: true, AttachStdout: true, AttachStderr: true,
			OpenStdin: true, StdinOnce: true, Cmd: []string{"--agent"}, Image: "img:1", WorkingDir: "/workspace",
			Entrypoint: []string{"/exechost"}, NetworkDisabled: true, Labels: map[string]string{"a": "b"},
		},
		HostConfig: &container.HostConfig{
			Mounts:      []mount.Mount{{Type: mount.TypeBind, Source: "/w", Target: "/workspace"}, {Type: mount.TypeBind, Source: "/bin/x", Target: "/exechost", ReadOnly: true}},
			NetworkMode: "none", ReadonlyRootfs: true, CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges"},
			Tmpfs:         map[string]string{"/tmp": "rw"},
			RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
			LogConfig:     container.LogConfig{Type: "none"},
			Resources:     container.Resources{Memory: 1 << 30, MemorySwap: 1 << 30, NanoCPUs: 1500000000, PidsLimit: &pids},
		},
	}
	decode := func(v any) map[string]any {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	o, m := decode(ours), decode(theirs)
	oh, mh := o["HostConfig"].(map[string]any), m["HostConfig"].(map[string]any)
	delete(o, "HostConfig")
	for k, v := range o {
		if diff := cmp.Diff(m[k], v); diff != "" {
			t.Errorf("Config.%s (-moby +ours):\n%s", k, diff)
		}
	}
	for k, v := range oh {
		want := mh[k]
		switch k {
		case "RestartPolicy", "LogConfig":
			// Ours leaves out MaximumRetryCount and Config (zero in both).
			want = map[string]any{"Name": mh[k].(map[string]any)["Name"], "Type": mh[k].(map[string]any)["Type"]}
			for kk := range want.(map[string]any) {
				if _, ok := v.(map[string]any)[kk]; !ok {
					delete(want.(map[string]any), kk)
				}
			}
		}
		if diff := cmp.Diff(want, v); diff != "" {
			t.Errorf("HostConfig.%s (-moby +ours):\n%s", k, diff)
		}
	}
}
