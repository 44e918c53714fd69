package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/exechost/exechost/internal/hint"
)

// Render returns the unit file for c on this platform.
func Render(c Config) ([]byte, error) { return SystemdUnit(c) }

// UnitPath returns where the unit for kind is installed on this platform.
func UnitPath(kind string, system bool) (string, error) { return SystemdUnitPath(kind, system) }

func systemctl(system bool, args ...string) []string {
	if system {
		return args
	}
	return append([]string{"--user"}, args...)
}

func managerHint(system bool) string {
	if system {
		return "is systemd running? use --no-start to only write the unit"
	}
	return "is there a user systemd session? over ssh, run `loginctl enable-linger $USER` once; or use --no-start to only write the unit"
}

func install(ctx context.Context, c Config, opts InstallOptions) (string, error) {
	data, err := SystemdUnit(c)
	if err != nil {
		return "", err
	}
	path, err := SystemdUnitPath(c.Kind, c.System)
	if err != nil {
		return "", err
	}
	if err := writeUnit(path, data); err != nil {
		return "", err
	}
	if opts.NoStart {
		return path, nil
	}
	hint := managerHint(c.System)
	name := Name(c.Kind)
	for _, args := range [][]string{{"daemon-reload"}, {"enable", name}, {"restart", name}} {
		if err := run(ctx, opts.Out, hint, "systemctl", systemctl(c.System, args...)...); err != nil {
			return path, err
		}
	}
	if !c.System {
		fmt.Fprintf(opts.Out, "note: user services stop when you log out unless lingering is enabled: loginctl enable-linger %s\n", os.Getenv("USER"))
	}
	return path, nil
}

func uninstall(ctx context.Context, kind string, system bool, out io.Writer) (string, error) {
	path, err := SystemdUnitPath(kind, system)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return path, fmt.Errorf("%s: %w", path, ErrNotInstalled)
	}
	// Stopping may fail when no service manager runs; removing the unit
	// is still what the user asked for, so report both.
	stopErr := run(ctx, out, managerHint(system), "systemctl", systemctl(system, "disable", "--now", Name(kind))...)
	if err := removeUnit(path); err != nil {
		return path, errors.Join(stopErr, err)
	}
	if stopErr == nil {
		stopErr = run(ctx, out, managerHint(system), "systemctl", systemctl(system, "daemon-reload")...)
	}
	return path, stopErr
}

func status(ctx context.Context, kind string, system bool, out io.Writer) error {
	path, err := SystemdUnitPath(kind, system)
	if err != nil {
		return err
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return hint.Wrap(fmt.Errorf("%s: %w", path, ErrNotInstalled), fmt.Sprintf("exechost %s install", kind))
	}
	fmt.Fprintf(out, "unit: %s\n", path)
	cmd := exec.CommandContext(ctx, "systemctl", systemctl(system, "status", "--no-pager", Name(kind))...)
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	var ee *exec.ExitError
	// systemctl status exits 3 for a stopped unit and 4 for an unknown
	// one; the output already says which.
	if errors.As(err, &ee) && (ee.ExitCode() == 3 || ee.ExitCode() == 4) {
		return nil
	}
	if err != nil {
		return hint.Wrap(fmt.Errorf("systemctl status %s: %w", Name(kind), err), managerHint(system))
	}
	return nil
}
