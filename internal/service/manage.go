package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/exechost/exechost/internal/atomicfile"
	"github.com/exechost/exechost/internal/hint"
)

// InstallOptions control Install.
type InstallOptions struct {
	// NoStart only writes the unit: no daemon-reload, enable or start.
	NoStart bool
	// Out receives the service manager's output and hints.
	Out io.Writer
}

// Install writes the unit (or plist) for c and, unless NoStart, enables and
// (re)starts it. It returns the path written.
func Install(ctx context.Context, c Config, opts InstallOptions) (string, error) {
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	return install(ctx, c, opts)
}

// Uninstall stops and disables the service for kind and removes its unit.
// It returns the path removed, or ErrNotInstalled.
func Uninstall(ctx context.Context, kind string, system bool, out io.Writer) (string, error) {
	if out == nil {
		out = io.Discard
	}
	return uninstall(ctx, kind, system, out)
}

// Status prints the service manager's view of the service to out. It
// returns ErrNotInstalled when there is no unit; a stopped or failed
// service is not an error (the output says so).
func Status(ctx context.Context, kind string, system bool, out io.Writer) error {
	if out == nil {
		out = io.Discard
	}
	return status(ctx, kind, system, out)
}

// writeUnit writes data to path atomically (0644: service managers read
// units as other users; the unit holds no secrets).
func writeUnit(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// removeUnit removes path, mapping absence to ErrNotInstalled.
func removeUnit(path string) error {
	err := os.Remove(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: %w", path, ErrNotInstalled)
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

// run runs a service manager command, copying its output to out.
func run(ctx context.Context, out io.Writer, how, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return hint.Wrap(fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err), how)
	}
	return nil
}
