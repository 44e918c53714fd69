//go:build !linux

package bwrap

import (
	"context"
	"fmt"
	"runtime"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/sandbox"
)

// Backend is the daemonless sandbox; it exists only on Linux.
type Backend struct{}

var _ sandbox.Backend = (*Backend)(nil)

// Open always fails off Linux: bubblewrap needs Linux namespaces.
func Open(context.Context, sandbox.Config, string) (*Backend, error) {
	return nil, hint.Wrap(fmt.Errorf("%w: needs Linux namespaces, this is %s", ErrUnavailable, runtime.GOOS), "use sandbox.backend=docker")
}

// Name identifies the backend.
func (*Backend) Name() string { return Name }

// Isolation reports nothing: the backend never opens here.
func (*Backend) Isolation() []string { return nil }

// CommandPath says commands never run here.
func (*Backend) CommandPath() sandbox.CommandPath {
	return sandbox.CommandPath{Mode: sandbox.PathPerCommand, Reason: "the backend needs Linux"}
}

// BwrapPath reports nothing: the backend never opens here.
func (*Backend) BwrapPath() string { return "" }

// Report reports nothing: the backend never opens here.
func (*Backend) Report() Report { return Report{} }

// Exec always fails off Linux.
func (*Backend) Exec(context.Context, sandbox.Request) (runner.Result, error) {
	return runner.Result{}, ErrUnavailable
}

// Close does nothing.
func (*Backend) Close(context.Context) error { return nil }
