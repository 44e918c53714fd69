package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
)

// Capabilities says what a backend offers, for the chooser, `exechost
// sandbox doctor` and the docs.
type Capabilities struct {
	// ResidentAgent: commands can be forked by a resident agent inside
	// the sandbox (package sandbox/agent) instead of one runtime call each.
	ResidentAgent bool `json:"residentAgent,omitempty"`
	// Daemonless: nothing but this process has to run for it.
	Daemonless bool `json:"daemonless,omitempty"`
	// Remote: sandboxes may run on other machines, so the host workspace
	// directory is not mounted into them.
	Remote bool `json:"remote,omitempty"`
	// WarmPool: ready sandboxes are kept for scopes not seen yet.
	WarmPool bool `json:"warmPool,omitempty"`
}

// List names the capabilities that are set, for humans.
func (c Capabilities) List() []string {
	var out []string
	for _, f := range []struct {
		on   bool
		name string
	}{{c.ResidentAgent, "resident agent"}, {c.Daemonless, "daemonless"}, {c.Remote, "remote"}, {c.WarmPool, "warm pool"}} {
		if f.on {
			out = append(out, f.name)
		}
	}
	return out
}

// Status is what Driver.Status (a driver's Diagnose) reports about its
// backend on this machine, for `exechost sandbox doctor`.
type Status struct {
	// Name is the driver's name.
	Name string `json:"name"`
	// Available is whether the backend can run commands here.
	Available bool `json:"available"`
	// Detail says where it runs (daemon, image, bwrap path, cluster) when
	// available, and why not (with a hint) otherwise.
	Detail string `json:"detail"`
	// Isolation lists what a sandbox gets here.
	Isolation []string `json:"isolation,omitempty"`
	// Commands says how commands run here, when the backend tells.
	Commands *CommandPath `json:"commands,omitempty"`
}

// How a backend runs commands (CommandPath.Mode).
const (
	// PathAgent: a resident agent inside the sandbox forks them.
	PathAgent = "agent"
	// PathPerCommand: one runtime call each (docker exec, a fresh bwrap
	// sandbox).
	PathPerCommand = "per-command"
)

// How the resident agent's binary runs (CommandPath.Binary).
const (
	// BinaryStatic: a statically linked binary, as it is.
	BinaryStatic = "static"
	// BinaryCarriedLoader: a dynamically linked binary, started through
	// its own loader and libraries carried into the sandbox with it.
	BinaryCarriedLoader = "carried-loader"
)

// CommandPath says how a backend runs commands here and why, for `exechost
// sandbox doctor` and the notice of a sandbox's first command.
type CommandPath struct {
	// Mode is PathAgent or PathPerCommand.
	Mode string `json:"mode"`
	// Binary is how the agent binary runs (BinaryStatic,
	// BinaryCarriedLoader) when Mode is PathAgent and it matters (not for
	// bwrap, whose sandbox sees the host's libraries).
	Binary string `json:"binary,omitempty"`
	// Reason says why, in words.
	Reason string `json:"reason"`
}

// PathReporter is implemented by backends that can say how they run
// commands (CommandPath); the gateway tells a session's first sandbox
// command which path it took.
type PathReporter interface {
	CommandPath() CommandPath
}

// String is the one line a user reads.
func (p CommandPath) String() string {
	if p.Mode == PathAgent && p.Binary != "" {
		return "resident agent (" + p.Binary + "): " + p.Reason
	}
	if p.Mode == PathAgent {
		return "resident agent: " + p.Reason
	}
	return "per command: " + p.Reason
}

// Driver is a sandbox backend as it registers itself, in the spirit of
// database/sql drivers: a backend package calls Register from its init, and
// the chooser (package sandbox/pick) and doctor iterate the registry.
type Driver struct {
	// Name is the value of sandbox.backend that selects it ("docker").
	Name string
	// Config is its own object inside "sandbox" in exechost.json (key,
	// type, defaults, validation; see NewSection), or nil when it has
	// none.
	Config *Section
	// Summary says in a few words what one sandbox is.
	Summary string
	// Capabilities are what it offers.
	Capabilities Capabilities
	// Auto places it in sandbox.backend "auto": drivers with Auto > 0 are
	// tried in ascending order; 0 means only when named.
	Auto int
	// Open returns a working backend for cfg (defaults applied and
	// validated), or an error saying why not, with a hint.
	Open func(ctx context.Context, cfg Config, stateDir string) (Backend, error)
	// Diagnose checks whether the backend works here without disturbing
	// a running gateway's sandboxes: what it found, or why it does not
	// work (with a hint). Status turns the answer into a Status.
	Diagnose func(ctx context.Context, cfg Config, stateDir string) (Found, error)
}

// Found is what Diagnose reports of a backend that works here.
type Found struct {
	// Detail says where it runs (daemon, image, bwrap path, cluster).
	Detail string
	// Isolation lists what a sandbox gets here.
	Isolation []string
	// Commands says how commands would run (agent or one runtime call
	// each, and why); a driver may fill it with an error too.
	Commands *CommandPath
}

// Status runs d.Diagnose and reports it for doctor: available with what
// it found, or unavailable with the error's text as the detail.
func (d Driver) Status(ctx context.Context, cfg Config, stateDir string) Status {
	found, err := d.Diagnose(ctx, cfg, stateDir)
	if err != nil {
		return Status{Name: d.Name, Detail: err.Error(), Commands: found.Commands}
	}
	return Status{Name: d.Name, Available: true, Detail: found.Detail, Isolation: found.Isolation, Commands: found.Commands}
}

// OpenAs adapts a backend package's Open, which returns its concrete type,
// to Driver.Open: on error the result is a nil interface, never an
// interface holding a typed nil pointer.
func OpenAs[B Backend](open func(context.Context, Config, string) (B, error)) func(context.Context, Config, string) (Backend, error) {
	return func(ctx context.Context, cfg Config, stateDir string) (Backend, error) {
		b, err := open(ctx, cfg, stateDir)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
}

// Registry holds drivers by name. The zero value is empty and ready; it is
// safe for concurrent use.
type Registry struct {
	mu      sync.Mutex
	drivers map[string]Driver
}

// Register adds d; a driver without a name, Open or Diagnose, one named
// like a keyword of sandbox.backend, or a second driver of one name is an
// error.
func (r *Registry) Register(d Driver) error {
	switch {
	case d.Name == "" || strings.ToLower(d.Name) != d.Name:
		return fmt.Errorf("sandbox driver %q: the name must be lower-case and not empty", d.Name)
	case d.Name == BackendAuto || d.Name == BackendNone:
		return fmt.Errorf("sandbox driver %q: the name is a keyword of sandbox.backend", d.Name)
	case d.Open == nil || d.Diagnose == nil:
		return fmt.Errorf("sandbox driver %q: Open and Diagnose are required", d.Name)
	case d.Config != nil && (d.Config.Key == "" || d.Config.decode == nil):
		return fmt.Errorf("sandbox driver %q: its config section needs a key and NewSection", d.Name)
	case d.Config != nil && slices.Contains(commonKeys, d.Config.Key):
		return fmt.Errorf("sandbox driver %q: config section %q is a common key of \"sandbox\"", d.Name, d.Config.Key)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.drivers[d.Name]; dup {
		return fmt.Errorf("sandbox driver %q registered twice", d.Name)
	}
	for _, o := range r.drivers {
		if d.Config != nil && o.Config != nil && o.Config.Key == d.Config.Key {
			return fmt.Errorf("sandbox driver %q: config section %q is already driver %q's", d.Name, d.Config.Key, o.Name)
		}
	}
	if r.drivers == nil {
		r.drivers = map[string]Driver{}
	}
	r.drivers[d.Name] = d
	return nil
}

// Lookup returns the driver named name.
func (r *Registry) Lookup(name string) (Driver, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.drivers[name]
	return d, ok
}

// Drivers returns every driver: those "auto" tries first, in its order,
// then the others by name.
func (r *Registry) Drivers() []Driver {
	r.mu.Lock()
	out := make([]Driver, 0, len(r.drivers))
	for _, d := range r.drivers {
		out = append(out, d)
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b Driver) int {
		return cmp.Or(cmp.Compare(autoRank(a), autoRank(b)), strings.Compare(a.Name, b.Name))
	})
	return out
}

// autoRank orders drivers that "auto" does not try after those it does.
func autoRank(d Driver) int {
	if d.Auto <= 0 {
		return math.MaxInt
	}
	return d.Auto
}

// Names returns the registered names in Drivers order.
func (r *Registry) Names() []string {
	var out []string
	for _, d := range r.Drivers() {
		out = append(out, d.Name)
	}
	return out
}

// drivers is the registry backend packages add themselves to.
var drivers Registry

// Register adds d to the registry every backend package registers with,
// from its init. It panics on an invalid or duplicate driver, as
// database/sql.Register does: that is a programming error.
func Register(d Driver) {
	if err := drivers.Register(d); err != nil {
		panic(err)
	}
}

// Drivers returns the registry backend packages register with (see
// Register); package sandbox/pick imports the built-in ones.
func Drivers() *Registry { return &drivers }

// ErrUnknownBackend is returned for a sandbox.backend that no driver in
// the binary registered.
var ErrUnknownBackend = errors.New("unknown sandbox backend")
