//go:build !linux && !darwin

package service

import (
	"context"
	"io"
)

// Render fails: no service manager is supported on this platform yet.
func Render(Config) ([]byte, error) { return nil, unsupported() }

// UnitPath fails: no service manager is supported on this platform yet.
func UnitPath(string, bool) (string, error) { return "", unsupported() }

func install(context.Context, Config, InstallOptions) (string, error) { return "", unsupported() }

func uninstall(context.Context, string, bool, io.Writer) (string, error) {
	return "", unsupported()
}

func status(context.Context, string, bool, io.Writer) error { return unsupported() }
