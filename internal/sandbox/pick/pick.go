// Package pick opens the sandbox backend exechost.json asks for, and
// explains which backends work on this machine (`exechost sandbox doctor`).
// Both iterate the driver registry (sandbox.Register); this package imports
// the built-in drivers so that every binary that chooses a sandbox has
// them. With sandbox.backend "auto" it tries the drivers that take part in
// auto, in their order — Docker when a daemon answers and has the image,
// else the daemonless bwrap backend when it works on this kernel; otherwise
// there is no sandbox, and host=sandbox fails with sandbox.ErrNotConfigured
// — never a fallback to the host.
package pick

import (
	"context"
	"fmt"
	"strings"

	"github.com/exechost/exechost/internal/sandbox"
	// The built-in drivers register themselves.
	_ "github.com/exechost/exechost/internal/sandbox/bwrap"
	_ "github.com/exechost/exechost/internal/sandbox/docker"
	_ "github.com/exechost/exechost/internal/sandbox/kubernetes"
)

// Open returns the backend cfg.Backend names, or for "auto" the first that
// works of the drivers auto tries. "none", and "auto" when nothing works,
// return an error wrapping sandbox.ErrNotConfigured that says why.
func Open(ctx context.Context, cfg sandbox.Config, stateDir string) (sandbox.Backend, error) {
	return OpenFrom(ctx, sandbox.Drivers(), cfg, stateDir)
}

// OpenFrom is Open over the drivers of reg.
func OpenFrom(ctx context.Context, reg *sandbox.Registry, cfg sandbox.Config, stateDir string) (sandbox.Backend, error) {
	if _, ok := reg.Lookup(cfg.Backend); !ok && cfg.Backend != "" && cfg.Backend != sandbox.BackendAuto && cfg.Backend != sandbox.BackendNone {
		return nil, fmt.Errorf("%w: %w %q: not built into this binary (built in: %s)", sandbox.ErrNotConfigured, sandbox.ErrUnknownBackend, cfg.Backend, strings.Join(reg.Names(), ", "))
	}
	cfg = reg.WithDefaults(cfg)
	if err := reg.Validate(cfg); err != nil {
		return nil, err
	}
	switch cfg.Backend {
	case sandbox.BackendNone:
		return nil, fmt.Errorf("%w (sandbox.backend is \"none\")", sandbox.ErrNotConfigured)
	case sandbox.BackendAuto:
	default:
		d, _ := reg.Lookup(cfg.Backend)
		return d.Open(ctx, cfg, stateDir)
	}
	var why []string
	for _, d := range reg.Drivers() {
		if d.Auto <= 0 {
			continue
		}
		b, err := d.Open(ctx, cfg, stateDir)
		if err == nil {
			return b, nil
		}
		why = append(why, d.Name+": "+err.Error())
	}
	if len(why) == 0 {
		return nil, fmt.Errorf("%w: no backend takes part in sandbox.backend \"auto\"", sandbox.ErrNotConfigured)
	}
	return nil, fmt.Errorf("%w: %s", sandbox.ErrNotConfigured, strings.Join(why, "; "))
}

// Status is what doctor reports about one backend.
type Status = sandbox.Status

// Diagnosis is the result of Diagnose.
type Diagnosis struct {
	// Configured is sandbox.backend (after defaults).
	Configured string `json:"configured"`
	// Selected is the backend Open would use, or "" when none works.
	Selected string `json:"selected"`
	// Backends reports each registered backend, those auto tries first
	// in its order (docker, bwrap), then the others by name.
	Backends []Status `json:"backends"`
}

// Diagnose checks every registered backend without side effects on running
// gateways (see each driver's Diagnose).
func Diagnose(ctx context.Context, cfg sandbox.Config, stateDir string) (Diagnosis, error) {
	return DiagnoseFrom(ctx, sandbox.Drivers(), cfg, stateDir)
}

// DiagnoseFrom is Diagnose over the drivers of reg.
func DiagnoseFrom(ctx context.Context, reg *sandbox.Registry, cfg sandbox.Config, stateDir string) (Diagnosis, error) {
	cfg = reg.WithDefaults(cfg)
	if err := reg.Validate(cfg); err != nil {
		return Diagnosis{}, err
	}
	d := Diagnosis{Configured: cfg.Backend}
	for _, drv := range reg.Drivers() {
		s := drv.Status(ctx, cfg, stateDir)
		d.Backends = append(d.Backends, s)
		if d.Selected == "" && s.Available && (cfg.Backend == drv.Name || cfg.Backend == sandbox.BackendAuto && drv.Auto > 0) {
			d.Selected = drv.Name
		}
	}
	if cfg.Backend != sandbox.BackendAuto && cfg.Backend != sandbox.BackendNone {
		if _, ok := reg.Lookup(cfg.Backend); !ok {
			return d, fmt.Errorf("sandbox.backend: %w %q: not built into this binary", sandbox.ErrUnknownBackend, cfg.Backend)
		}
	}
	return d, nil
}
