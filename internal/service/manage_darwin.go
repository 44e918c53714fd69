package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/exechost/exechost/internal/hint"
)

// Render returns the property list for c on this platform.
func Render(c Config) ([]byte, error) { return LaunchdPlist(c) }

// UnitPath returns where the plist for kind is installed on this platform.
func UnitPath(kind string, system bool) (string, error) { return LaunchdPlistPath(kind, system) }

// domain is the launchd domain target: the GUI session of this user, or
// the system domain.
func domain(system bool) string {
	if system {
		return "system"
	}
	return "gui/" + strconv.Itoa(os.Getuid())
}

const launchdHint = "check `launchctl print` output above; use --no-start to only write the plist"

func install(ctx context.Context, c Config, opts InstallOptions) (string, error) {
	data, err := LaunchdPlist(c)
	if err != nil {
		return "", err
	}
	path, err := LaunchdPlistPath(c.Kind, c.System)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", c.StateDir, err)
	}
	if err := writeUnit(path, data); err != nil {
		return "", err
	}
	if opts.NoStart {
		return path, nil
	}
	// bootout fails when not loaded; that is fine on a first install.
	_ = run(ctx, io.Discard, "", "launchctl", "bootout", domain(c.System)+"/"+Label(c.Kind))
	if err := run(ctx, opts.Out, launchdHint, "launchctl", "bootstrap", domain(c.System), path); err != nil {
		return path, err
	}
	return path, nil
}

func uninstall(ctx context.Context, kind string, system bool, out io.Writer) (string, error) {
	path, err := LaunchdPlistPath(kind, system)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return path, fmt.Errorf("%s: %w", path, ErrNotInstalled)
	}
	stopErr := run(ctx, out, launchdHint, "launchctl", "bootout", domain(system)+"/"+Label(kind))
	if err := removeUnit(path); err != nil {
		return path, errors.Join(stopErr, err)
	}
	return path, stopErr
}

func status(ctx context.Context, kind string, system bool, out io.Writer) error {
	path, err := LaunchdPlistPath(kind, system)
	if err != nil {
		return err
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return hint.Wrap(fmt.Errorf("%s: %w", path, ErrNotInstalled), fmt.Sprintf("exechost %s install", kind))
	}
	fmt.Fprintf(out, "plist: %s\n", path)
	return run(ctx, out, "the agent is installed but not loaded; run exechost "+kind+" install again", "launchctl", "print", domain(system)+"/"+Label(kind))
}
