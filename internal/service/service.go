// Package service installs exechost's daemons — the node runner and the
// gateway — as services of the operating system: a systemd unit on Linux
// (user unit by default, system unit on request) and a launchd agent on
// macOS. Windows is not supported yet and says so.
//
// The units are generated from text/template and checked in tests against
// golden files and `systemd-analyze verify`. They use Type=notify: the
// daemons call NotifyReady once they serve and NotifyStopping when they
// begin a graceful shutdown, so `systemctl start` returns only when the
// daemon really runs, and a crash loop is visible.
//
// Hardening is a trade-off between locking the daemon down and letting it
// do its job, which for both daemons includes running the commands agents
// ask for (host=node on a node, host=gateway on the gateway host). Those
// commands inherit every restriction of the service. So there are two
// profiles:
//
//   - HardeningStrict (gateway default): read-only system and home except
//     the state directory and any extra --rw-path, private /tmp and /dev, no
//     kernel tunables, no W^X memory (breaks JIT runtimes such as node or
//     java run as host=gateway commands), a system-service syscall filter.
//   - HardeningLight (node default): no privilege gain (setuid programs such
//     as sudo do not elevate), no SUID/SGID files, no personality changes,
//     no realtime scheduling. The file system stays as writable as for the
//     user, because the node exists to run the user's build and test
//     commands in the user's directories.
//
// Directives that need a mount namespace (ProtectSystem, ProtectHome,
// PrivateTmp, …) are only emitted for system units: in a user unit they
// depend on unprivileged user namespaces, which several distributions
// restrict, and the service would then fail to start at all.
package service

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"

	"github.com/exechost/exechost/internal/hint"
)

// Kinds of daemon a service runs.
const (
	KindNode    = "node"
	KindGateway = "gateway"
)

// Hardening profiles.
const (
	HardeningStrict = "strict"
	HardeningLight  = "light"
)

// ErrUnsupported is returned on platforms without service support.
var ErrUnsupported = errors.New("system services are not supported on this platform yet")

// ErrNotInstalled is returned by Status and Uninstall when no unit exists.
var ErrNotInstalled = errors.New("service not installed")

// Config describes one service to install.
type Config struct {
	// Kind is KindNode or KindGateway.
	Kind string
	// Binary is the absolute path of the exechost executable.
	Binary string
	// Args are the arguments after Binary (for example
	// ["node", "run", "--gateway", "ws://…", "--state-dir", "/…"]).
	Args []string
	// StateDir is the absolute state directory; strict hardening leaves it
	// writable.
	StateDir string
	// System installs a system unit (/etc/systemd/system, a launchd
	// daemon) instead of a per-user one.
	System bool
	// User runs a system unit as this user (systemd User=); empty means
	// root, which is rarely what you want for a service that runs agents'
	// commands.
	User string
	// Hardening is HardeningStrict or HardeningLight; empty picks the
	// kind's default (DefaultHardening).
	Hardening string
	// ReadWritePaths are extra paths a strict system unit may write to.
	ReadWritePaths []string
}

// DefaultHardening returns the hardening profile for a daemon kind.
func DefaultHardening(kind string) string {
	if kind == KindNode {
		return HardeningLight
	}
	return HardeningStrict
}

// Name returns the service name: "exechost-node" or "exechost-gateway".
func Name(kind string) string { return "exechost-" + kind }

// Label returns the launchd label: "dev.exechost.node" or
// "dev.exechost.gateway".
func Label(kind string) string { return "dev.exechost." + kind }

// validate checks c and fills defaults.
func (c Config) validate() (Config, error) {
	switch c.Kind {
	case KindNode, KindGateway:
	default:
		return c, fmt.Errorf("service kind %q: must be %q or %q", c.Kind, KindNode, KindGateway)
	}
	if c.Hardening == "" {
		c.Hardening = DefaultHardening(c.Kind)
	}
	if c.Hardening != HardeningStrict && c.Hardening != HardeningLight {
		return c, fmt.Errorf("hardening %q: must be %q or %q", c.Hardening, HardeningStrict, HardeningLight)
	}
	if !filepath.IsAbs(c.Binary) {
		return c, fmt.Errorf("service binary %q: must be an absolute path", c.Binary)
	}
	if !filepath.IsAbs(c.StateDir) {
		return c, fmt.Errorf("service state directory %q: must be an absolute path", c.StateDir)
	}
	for _, a := range append([]string{c.Binary, c.StateDir, c.User}, c.Args...) {
		for _, r := range a {
			if r < 0x20 || r == 0x7f {
				return c, fmt.Errorf("service argument %q: control characters are not allowed", a)
			}
		}
	}
	for _, p := range c.ReadWritePaths {
		if !filepath.IsAbs(p) {
			return c, fmt.Errorf("read-write path %q: must be an absolute path", p)
		}
	}
	return c, nil
}

// unsupported is the error for platforms without a service manager we
// support (manage_other.go).
//
//lint:ignore U1000 used by manage_other.go, which builds on other platforms
func unsupported() error {
	return hint.Wrap(fmt.Errorf("%w: %s", ErrUnsupported, runtime.GOOS), "run `exechost node run …` or `exechost gateway` from a terminal or the platform's task scheduler for now")
}
