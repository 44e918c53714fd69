package pick

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/docker"
	"github.com/exechost/exechost/internal/sandbox/docker/dockertest"
	"github.com/exechost/exechost/internal/testdep"
)

// noDocker points the docker backend at a socket nobody listens on.
func noDocker(t *testing.T, c *sandbox.Config) {
	c.Docker.Host = "unix://" + filepath.Join(t.TempDir(), "none.sock")
}

// needBwrap reports a missing bwrap, or a kernel where it cannot work.
func needBwrap(t *testing.T) {
	testdep.Bwrap(t, false)
}

func TestOpen(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(*testing.T, *sandbox.Config)
		want    string // backend name, or "" for ErrNotConfigured
		wantErr error
	}{
		{"none", func(_ *testing.T, c *sandbox.Config) { c.Backend = sandbox.BackendNone }, "", sandbox.ErrNotConfigured},
		{"auto prefers docker", func(t *testing.T, c *sandbox.Config) {
			c.Docker.Image = dockertest.BuildImage(t, dockertest.Client(t))
		}, "docker", nil},
		{"auto without a daemon uses bwrap", func(t *testing.T, c *sandbox.Config) {
			needBwrap(t)
			noDocker(t, c)
		}, "bwrap", nil},
		{"auto without the image uses bwrap", func(t *testing.T, c *sandbox.Config) {
			needBwrap(t)
			dockertest.Client(t)
			c.Docker.Image = "exechost-no-such-image:never"
		}, "bwrap", nil},
		{"auto with nothing working", func(t *testing.T, c *sandbox.Config) {
			noDocker(t, c)
			c.Bwrap.Path = filepath.Join(t.TempDir(), "no-bwrap")
		}, "", sandbox.ErrNotConfigured},
		{"docker explicitly, daemon down", func(t *testing.T, c *sandbox.Config) {
			needBwrap(t)
			c.Backend = sandbox.BackendDocker
			noDocker(t, c)
		}, "", docker.ErrDaemonUnreachable},
		{"bwrap explicitly", func(t *testing.T, c *sandbox.Config) {
			needBwrap(t)
			c.Backend = sandbox.BackendBwrap
		}, "bwrap", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := sandbox.DefaultConfig()
			tt.setup(t, &cfg)
			b, err := Open(context.Background(), cfg, t.TempDir())
			if tt.want == "" {
				if err == nil {
					b.Close(context.Background())
					t.Fatalf("Open = %s, want an error", b.Name())
				}
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("Open: %v, want %v", err, tt.wantErr)
				}
				if b != nil {
					t.Errorf("Open returned a backend with its error")
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer b.Close(context.Background())
			if b.Name() != tt.want {
				t.Errorf("backend = %s, want %s", b.Name(), tt.want)
			}
		})
	}
}

func TestOpenRejectsBadConfig(t *testing.T) {
	cfg := sandbox.DefaultConfig()
	cfg.Scope = "galaxy"
	if _, err := Open(context.Background(), cfg, t.TempDir()); err == nil || errors.Is(err, sandbox.ErrNotConfigured) {
		t.Errorf("Open with a bad scope: %v, want a validation error", err)
	}
}

func TestDiagnose(t *testing.T) {
	needBwrap(t)
	cfg := sandbox.DefaultConfig()
	noDocker(t, &cfg)
	d, err := Diagnose(context.Background(), cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if d.Selected != "bwrap" || d.Configured != "auto" || len(d.Backends) != 2 {
		t.Fatalf("diagnosis = %+v", d)
	}
	if dk := d.Backends[0]; dk.Available || dk.Name != "docker" || dk.Detail == "" {
		t.Errorf("docker status = %+v, want unavailable with a reason", dk)
	}
	if bw := d.Backends[1]; !bw.Available || len(bw.Isolation) == 0 {
		t.Errorf("bwrap status = %+v, want available with its isolation", bw)
	}

	cfg.Backend = sandbox.BackendDocker
	d, err = Diagnose(context.Background(), cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if d.Selected != "" {
		t.Errorf("backend docker with no daemon: selected %q, want none", d.Selected)
	}
}
