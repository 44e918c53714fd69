// Package pick opens the sandbox backend exechost.json asks for, and
// explains which backends work on this machine (`exechost sandbox doctor`).
// With sandbox.backend "auto" it prefers Docker when a daemon answers and
// has the image, else the daemonless bwrap backend when it works on this
// kernel; otherwise there is no sandbox, and host=sandbox fails with
// sandbox.ErrNotConfigured — never a fallback to the host.
package pick

import (
	"context"
	"fmt"

	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/bwrap"
	"github.com/exechost/exechost/internal/sandbox/docker"
)

// Isolator is implemented by backends that can describe the isolation they
// achieve here (both built-in backends do).
type Isolator interface {
	Isolation() []string
}

// Open returns the backend cfg.Backend names, or for "auto" the first that
// works of docker and bwrap. "none", and "auto" when nothing works, return
// an error wrapping sandbox.ErrNotConfigured that says why.
func Open(ctx context.Context, cfg sandbox.Config, stateDir string) (sandbox.Backend, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch cfg.Backend {
	case sandbox.BackendNone:
		return nil, fmt.Errorf("%w (sandbox.backend is \"none\")", sandbox.ErrNotConfigured)
	case sandbox.BackendDocker:
		return openDocker(ctx, cfg, stateDir)
	case sandbox.BackendBwrap:
		return openBwrap(ctx, cfg, stateDir)
	}
	d, derr := openDocker(ctx, cfg, stateDir)
	if derr == nil {
		return d, nil
	}
	b, berr := openBwrap(ctx, cfg, stateDir)
	if berr == nil {
		return b, nil
	}
	return nil, fmt.Errorf("%w: docker: %v; bwrap: %v", sandbox.ErrNotConfigured, derr, berr)
}

// The openers return a nil interface (not a typed nil) on error.
func openDocker(ctx context.Context, cfg sandbox.Config, stateDir string) (sandbox.Backend, error) {
	b, err := docker.Open(ctx, cfg, stateDir)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func openBwrap(ctx context.Context, cfg sandbox.Config, stateDir string) (sandbox.Backend, error) {
	b, err := bwrap.Open(ctx, cfg, stateDir)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Status is what doctor reports about one backend.
type Status struct {
	// Name is "docker" or "bwrap".
	Name string `json:"name"`
	// Available is whether the backend can run commands here.
	Available bool `json:"available"`
	// Detail says where it runs (daemon, image, bwrap path) when
	// available, and why not (with a hint) otherwise.
	Detail string `json:"detail"`
	// Isolation lists what a sandbox gets on this machine.
	Isolation []string `json:"isolation,omitempty"`
}

// Diagnosis is the result of Diagnose.
type Diagnosis struct {
	// Configured is sandbox.backend (after defaults).
	Configured string `json:"configured"`
	// Selected is the backend Open would use, or "" when none works.
	Selected string `json:"selected"`
	// Backends reports each backend, docker first.
	Backends []Status `json:"backends"`
}

// Diagnose checks every backend without side effects on running gateways:
// docker is only pinged and asked for the image (Open would also remove
// orphan containers), bwrap runs its probe sandbox.
func Diagnose(ctx context.Context, cfg sandbox.Config, stateDir string) (Diagnosis, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return Diagnosis{}, err
	}
	d := Diagnosis{Configured: cfg.Backend}
	d.Backends = append(d.Backends, diagnoseDocker(ctx, cfg), diagnoseBwrap(ctx, cfg, stateDir))
	for _, s := range d.Backends {
		if !s.Available {
			continue
		}
		if cfg.Backend == s.Name || cfg.Backend == sandbox.BackendAuto {
			d.Selected = s.Name
			break
		}
	}
	return d, nil
}

func diagnoseDocker(ctx context.Context, cfg sandbox.Config) Status {
	s := Status{Name: sandbox.BackendDocker}
	cli, err := docker.NewClient(cfg.Docker.Host)
	if err != nil {
		s.Detail = err.Error()
		return s
	}
	defer cli.Close()
	if err := docker.Ping(ctx, cli); err != nil {
		s.Detail = err.Error()
		return s
	}
	if err := docker.CheckImage(ctx, cli, cfg.Docker.Image); err != nil {
		s.Detail = err.Error()
		return s
	}
	s.Available = true
	s.Detail = fmt.Sprintf("daemon %s (API %s), image %s present", cli.DaemonHost(), cli.ClientVersion(), cfg.Docker.Image)
	s.Isolation = docker.Describe(cfg)
	return s
}

func diagnoseBwrap(ctx context.Context, cfg sandbox.Config, stateDir string) Status {
	s := Status{Name: sandbox.BackendBwrap}
	b, err := bwrap.Open(ctx, cfg, stateDir)
	if err != nil {
		s.Detail = err.Error()
		return s
	}
	defer b.Close(ctx)
	s.Available = true
	s.Detail = "bubblewrap " + b.BwrapPath()
	s.Isolation = b.Isolation()
	return s
}
