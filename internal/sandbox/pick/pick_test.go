package pick

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/bwrap"
	"github.com/exechost/exechost/internal/sandbox/docker"
	"github.com/exechost/exechost/internal/sandbox/docker/dockertest"
	"github.com/exechost/exechost/internal/testdep"
)

// noDocker points the docker backend at a socket nobody listens on.
func noDocker(t *testing.T, c *sandbox.Config) {
	*c = docker.With(*c, func(d *docker.Config) { d.Host = "unix://" + filepath.Join(t.TempDir(), "none.sock") })
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
			*c = docker.With(*c, func(d *docker.Config) { d.Image = dockertest.BuildImage(t, dockertest.Client(t)) })
		}, "docker", nil},
		{"auto without a daemon uses bwrap", func(t *testing.T, c *sandbox.Config) {
			needBwrap(t)
			noDocker(t, c)
		}, "bwrap", nil},
		{"auto without the image uses bwrap", func(t *testing.T, c *sandbox.Config) {
			needBwrap(t)
			dockertest.Client(t)
			*c = docker.With(*c, func(d *docker.Config) { d.Image = "exechost-no-such-image:never" })
		}, "bwrap", nil},
		{"auto with nothing working", func(t *testing.T, c *sandbox.Config) {
			noDocker(t, c)
			*c = bwrap.With(*c, func(b *bwrap.Config) { b.Path = filepath.Join(t.TempDir(), "no-bwrap") })
		}, "", sandbox.ErrNotConfigured},
		{"docker explicitly, daemon down", func(t *testing.T, c *sandbox.Config) {
			needBwrap(t)
			c.Backend = docker.Name
			noDocker(t, c)
		}, "", docker.ErrDaemonUnreachable},
		{"bwrap explicitly", func(t *testing.T, c *sandbox.Config) {
			needBwrap(t)
			c.Backend = bwrap.Name
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
	if d.Selected != "bwrap" || d.Configured != "auto" || len(d.Backends) < 3 {
		t.Fatalf("diagnosis = %+v", d)
	}
	if dk := d.Backends[0]; dk.Available || dk.Name != "docker" || dk.Detail == "" {
		t.Errorf("docker status = %+v, want unavailable with a reason", dk)
	}
	if bw := d.Backends[1]; !bw.Available || len(bw.Isolation) == 0 {
		t.Errorf("bwrap status = %+v, want available with its isolation", bw)
	}
	if k := d.Backends[2]; k.Available || k.Name != "kubernetes" || !strings.Contains(k.Detail, "not configured") {
		t.Errorf("kubernetes status = %+v, want not configured", k)
	}

	cfg.Backend = docker.Name
	d, err = Diagnose(context.Background(), cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if d.Selected != "" {
		t.Errorf("backend docker with no daemon: selected %q, want none", d.Selected)
	}
}

// stub is a backend the registry tests open.
type stub struct{ name string }

func (s stub) Name() string { return s.name }
func (stub) Exec(context.Context, sandbox.Request) (runner.Result, error) {
	return runner.Result{}, nil
}
func (stub) Close(context.Context) error { return nil }

// stubDriver works when err is nil, and fails with err otherwise.
func stubDriver(name string, auto int, err error) sandbox.Driver {
	return sandbox.Driver{
		Name: name,
		Auto: auto,
		Open: func(context.Context, sandbox.Config, string) (sandbox.Backend, error) {
			if err != nil {
				return nil, err
			}
			return stub{name}, nil
		},
		Diagnose: func(context.Context, sandbox.Config, string) (sandbox.Found, error) {
			return sandbox.Found{Detail: "stub"}, err
		},
	}
}

// TestOpenFromRegistry covers the chooser over a registry of stub drivers:
// auto tries the drivers that take part in it in their order and skips
// the others, a named driver is opened even when auto would skip it, and
// a name nothing registered is a clear error.
func TestOpenFromRegistry(t *testing.T) {
	var reg sandbox.Registry
	for _, d := range []sandbox.Driver{
		stubDriver("docker", 10, errors.New("daemon down")),
		stubDriver("bwrap", 20, nil),
		stubDriver("kubernetes", 0, nil),
	} {
		if err := reg.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	open := func(backend string) (string, error) {
		cfg := sandbox.Config{Backend: backend}
		b, err := OpenFrom(context.Background(), &reg, cfg, t.TempDir())
		if err != nil {
			return "", err
		}
		return b.Name(), nil
	}
	if got, err := open("auto"); err != nil || got != "bwrap" {
		t.Errorf("auto = %q, %v; want bwrap (docker fails, kubernetes is not in auto)", got, err)
	}
	if got, err := open("kubernetes"); err != nil || got != "kubernetes" {
		t.Errorf("kubernetes = %q, %v", got, err)
	}
	if _, err := open("docker"); err == nil || err.Error() != "daemon down" {
		t.Errorf("docker = %v, want its own error", err)
	}

	var empty sandbox.Registry
	if _, err := OpenFrom(context.Background(), &empty, sandbox.Config{Backend: "docker"}, t.TempDir()); !errors.Is(err, sandbox.ErrUnknownBackend) || !errors.Is(err, sandbox.ErrNotConfigured) {
		t.Errorf("a backend not built in: %v, want ErrUnknownBackend and ErrNotConfigured", err)
	}
	if _, err := OpenFrom(context.Background(), &empty, sandbox.Config{}, t.TempDir()); !errors.Is(err, sandbox.ErrNotConfigured) {
		t.Errorf("auto over no drivers: %v, want ErrNotConfigured", err)
	}

	d, err := DiagnoseFrom(context.Background(), &reg, sandbox.Config{}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range d.Backends {
		names = append(names, s.Name)
	}
	if d.Selected != "bwrap" || strings.Join(names, ",") != "docker,bwrap,kubernetes" {
		t.Errorf("diagnosis = %+v, want bwrap selected over docker,bwrap,kubernetes", d)
	}
	kcfg := sandbox.Config{Backend: "kubernetes"}
	d, err = DiagnoseFrom(context.Background(), &reg, kcfg, t.TempDir())
	if err != nil || d.Selected != "kubernetes" {
		t.Errorf("diagnosis with kubernetes named = %+v, %v", d, err)
	}
}

// TestBuiltinDrivers: the chooser's binary registers docker and bwrap, in
// that order of preference, then kubernetes (never chosen by auto), each
// with its own config section.
func TestBuiltinDrivers(t *testing.T) {
	names := sandbox.Drivers().Names()
	// TestFakeDriver may have added "testfake", which sorts after them.
	if len(names) < 3 || strings.Join(names[:3], ",") != "docker,bwrap,kubernetes" {
		t.Fatalf("drivers = %v, want docker, bwrap, kubernetes", names)
	}
	for i, n := range names[:3] {
		d, _ := sandbox.Drivers().Lookup(n)
		if d.Config == nil || d.Config.Key != n || (d.Auto > 0) != (i < 2) || !d.Capabilities.ResidentAgent {
			t.Errorf("driver %s = %+v", n, d)
		}
	}
}
