package sandbox

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/exechost/exechost/internal/hint"
)

// Egress by name in a sandbox (docs/sandbox.md, "Egress by name"): when
// the run's policy (the gateway's exec-approvals.json, confine.network)
// is a list of host[:port] patterns, the gateway's engine leases the run
// its egress proxy (Request.Egress). A backend that holds the list gives
// the sandbox no network of its own (Docker --network none) and one way
// out: a unix socket it makes for that sandbox alone, served by the
// proxy (Egress.Serve) and mounted into the sandbox, which the resident
// agent relays to EgressAddr on the sandbox's own loopback. The run gets
// Egress.Env: HTTP(S)_PROXY/ALL_PROXY naming EgressAddr with the run's
// own lease credentials, so each connection is tied to the run and its
// agent. A backend that cannot hold the list refuses the run
// (CheckEgress); it never gives it the whole network, nor none silently.

// EgressAddr is where a run inside a sandbox reaches the egress proxy: the
// agent's relay on the sandbox's own loopback (the host jail's address).
const EgressAddr = "127.0.0.1:3128"

// Egress is a run's lease on the gateway's egress proxy.
type Egress struct {
	// Key tells egress policies apart (agent, list, ask, askFallback):
	// runs share a sandbox only when their keys are equal, as a run that
	// can read another's environment there holds its credentials.
	Key string
	// Patterns is the list, for what backends report.
	Patterns []string
	// Env are the proxy variables for the run, naming EgressAddr with the
	// run's credentials (they override the request's Env).
	Env map[string]string
	// Serve serves the proxy on ln, a unix socket the backend made for
	// one sandbox, until ln is closed or the proxy ends. It owns ln.
	Serve func(ln net.Listener) error
}

// EgressHolder is implemented by backends that hold an egress list
// (Request.Egress). The gateway refuses a run with a list on any other
// backend (CheckEgress).
type EgressHolder interface {
	// HoldsEgress says whether this backend, as configured now, gives a
	// sandbox no network but the egress relay; nil when it does, else why
	// not, with a hint.
	HoldsEgress() error
}

// ErrNoEgress means the backend cannot hold an egress list: the run is
// refused rather than given more network, or less, than the list says.
var ErrNoEgress = errors.New("this sandbox backend cannot hold an egress list")

// CheckEgress refuses req on b when req carries an egress list and b cannot
// hold it.
func CheckEgress(b Backend, req Request) error {
	if req.Egress == nil {
		return nil
	}
	h, ok := b.(EgressHolder)
	if !ok {
		return hint.Wrap(fmt.Errorf("%w: sandbox backend %s (the agent's confine.network is a list of names)", ErrNoEgress, b.Name()), "use sandbox.backend docker for egress by name, or run the agent on host=gateway; a list is never widened to the whole network")
	}
	if err := h.HoldsEgress(); err != nil {
		return fmt.Errorf("%w: sandbox backend %s: %w", ErrNoEgress, b.Name(), err)
	}
	return nil
}

// RunEnv is req's environment with the egress variables laid over it.
func RunEnv(req Request) map[string]string {
	if req.Egress == nil || len(req.Egress.Env) == 0 {
		return req.Env
	}
	out := maps.Clone(req.Env)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, req.Egress.Env)
	return out
}

// EgressSocket is the name of the socket in a sandbox's egress directory
// (ListenEgress), and EgressMount where backends mount that directory
// inside the sandbox (read-only).
const (
	EgressSocket = "p.sock"
	EgressMount  = "/.exechost/egress"
)

// ListenEgress makes dir (its parent is made 0700 when missing: it must lie
// where no other host user reaches, such as the state directory) and has
// eg's proxy serve the socket EgressSocket in it. The directory and socket
// are opened to the sandbox's user (0711, 0666), whose only way in is the
// read-only mount at EgressMount. Closing the listener stops serving it;
// RemoveEgressDir removes the directory afterwards.
func ListenEgress(dir string, eg *Egress) (net.Listener, error) {
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, fmt.Errorf("egress socket directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("egress socket directory: %w", err)
	}
	path := filepath.Join(dir, EgressSocket)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, hint.Wrap(fmt.Errorf("egress socket: %w", err), "a unix socket path must be short: use a shorter state directory")
	}
	ln.SetUnlinkOnClose(true)
	for _, c := range []struct {
		p string
		m os.FileMode
	}{{path, 0o666}, {dir, 0o711}} {
		if err := os.Chmod(c.p, c.m); err != nil {
			ln.Close()
			os.RemoveAll(dir)
			return nil, fmt.Errorf("egress socket: %w", err)
		}
	}
	go eg.Serve(ln) //nolint:errcheck // ends when ln closes or the proxy does
	return ln, nil
}

// RemoveEgressDir closes ln (from ListenEgress) and removes its directory.
func RemoveEgressDir(ln net.Listener) {
	ln.Close()
	os.RemoveAll(filepath.Dir(ln.Addr().String()))
}

// EgressLeases keeps the latest egress lease of each sandbox key, for the
// box started for that key to serve (a backend that holds lists). The
// zero value is ready; it is safe for concurrent use.
type EgressLeases struct {
	mu    sync.Mutex
	byKey map[string]*Egress
}

// Note remembers eg as the lease of the box of key.
func (l *EgressLeases) Note(key string, eg *Egress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byKey == nil {
		l.byKey = map[string]*Egress{}
	}
	l.byKey[key] = eg
}

// Of is the lease noted for the box of key, or nil.
func (l *EgressLeases) Of(key string) *Egress {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byKey[key]
}
