// Package jail builds a run's jail once per confinement and keeps it
// ready: a small server process (this binary re-executed, entry point
// Arg) that is born in its own namespaces, builds the jail's layers on
// itself, and then forks and execs each run it is handed over a unix
// socket. A run's start is then one fork and one exec of the decided file
// from a process that is already jailed: no re-exec of this binary per run.
// The server does all its work on that one thread, with one P: it waits
// for requests and for its runs' ends (their pidfds) in one poll loop,
// so a run costs it two wake-ups and no goroutine.
//
// The layers (confine.Layer), each built by the server before it serves
// and each one switchable off (Options.Layers) so that tests can show
// what it alone refuses:
//
//   - view (mount namespace): the host's / recursively read-only and
//     nosuid (contents and metadata: chmod, chown, xattrs, utimes, links,
//     mknod fail with EROFS outside the writable roots); the writable
//     roots bound back read-write, nosuid, nodev; a private /tmp (tmpfs);
//     the protected set, the hidden set and the socket directories
//     ($XDG_RUNTIME_DIR, /run, /var/run, ~/.docker, …; /tmp's come with
//     the private /tmp) replaced by empty read-only directories (or
//     /dev/null for a file), except the sockets the confinement names;
//     the read-only set re-bound read-only inside writable roots; a fresh
//     /proc of the jail's pid namespace.
//   - network (network namespace, network none): only a loopback of the
//     jail's own; TCP, MPTCP, UDP, raw sockets and abstract unix sockets
//     reach nothing outside.
//   - pid (pid namespace): the server is the jail's init and each run is
//     the init of a nested namespace of its own, so a run sees and
//     signals nothing outside the jail, and killing a run's first process
//     kills every process it left.
//   - no-privilege: the forking thread's capability bounding, inheritable
//     and ambient sets are emptied and no_new_privs set before any run is
//     forked, so a run (root or not) has no capability after its exec and
//     set-uid files give it none; the server is not dumpable.
//   - seccomp: a filter on the forking thread (inherited by every run)
//     refusing mount and namespace calls, ptrace, keyring, bpf,
//     perf_event_open, module and kexec loading, reboot, clock setting,
//     userfaultfd, io_uring, TIOCSTI, and socket(…, IPPROTO_MPTCP).
//   - limits: a process bound for the jail (a pids cgroup where one is
//     writable, else RLIMIT_NPROC, which the kernel counts per user and
//     ignores for root) and the confinement's rlimits.
//   - landlock: the confinement's Landlock rules (confine.ApplyThread) on
//     the forking thread, with the hidden set kept out as the protected
//     set is.
//
// A run that names a warm argv (Request.Warm, Jail.Warmed: the host's
// interpreter) may instead be handed to a process the server started
// ahead of need from the same decided file, already in the jail
// (warm_linux.go): a hand-over, not a start of a large binary. Nothing
// else differs: the run is its own pid namespace's init, holds the same
// layers, and gets the argv, environment, directory, streams and pinned
// file a fresh start's execve would have given it.
//
// A user that is not root gets the namespaces through a user namespace
// mapping it to itself; root needs none. Held reports which layers this
// machine can build for a confinement, and Jail.Held which a started jail
// holds; the caller (the policy) decides whether a missing one refuses
// the run.
package jail

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"

	"github.com/exechost/exechost/internal/confine"
)

// Arg makes the binary run as a jail server: os.Args is [exe, Arg,
// options JSON]. Its descriptor 3 is the control socket.
const Arg = "--exechost-jail=v1"

// AllLayers are every layer a jail builds when it can, in the order the
// server builds them.
var AllLayers = []confine.Layer{
	confine.LayerLimits, confine.LayerNetwork, confine.LayerView, confine.LayerPID,
	confine.LayerLandlock, confine.LayerNoPrivilege, confine.LayerSeccomp,
}

// ErrJail wraps every failure to build or use a jail: nothing ran.
var ErrJail = errors.New("jail")

// DefaultProcs bounds the processes of a jail whose confinement sets no
// bound of its own (Limits.Procs).
const DefaultProcs = 512

// Options say what jail to build.
type Options struct {
	// Confine is the confinement the jail enforces (resolved: absolute,
	// real paths).
	Confine confine.Confinement `json:"confine"`
	// Layers are the layers to build; nil builds every layer this machine
	// can (Held). Tests name a subset to see what each one alone refuses.
	Layers []confine.Layer `json:"layers,omitempty"`
	// SocketDirs are the socket directories masked from the view unless a
	// named socket is inside (in addition to the fixed ones, see
	// socketDirs); the starter fills $XDG_RUNTIME_DIR and ~/.docker.
	SocketDirs []string `json:"socketDirs,omitempty"`
	// Readable are directories or files beneath /tmp bound read-only
	// into the view's private /tmp (the host's search path entries there,
	// a program decided on there): what was decided on must be reachable
	// where it was found. /tmp itself is never bound.
	Readable []string `json:"readable,omitempty"`
	// Cgroup, when set, is a directory of a writable pids cgroup (v1 or
	// v2) the server moves itself into before it serves, with pids.max
	// set to the process bound.
	Cgroup string `json:"cgroup,omitempty"`
	// UserNS asks for a user namespace (mapping the user to itself):
	// set by Start when the host is not root.
	UserNS bool `json:"userns,omitempty"`
	// Egress, with network none, is the jail's one way out: a relay on
	// its loopback to the host's egress proxy (egress_linux.go).
	Egress *EgressRelay `json:"egress,omitempty"`
	// UID and GID are the host user's, for the user namespace's maps.
	UID int `json:"uid,omitempty"`
	GID int `json:"gid,omitempty"`
}

// EgressRelay says where a jail's runs reach the egress proxy: Addr
// (host:port on the jail's own loopback, what HTTP(S)_PROXY names) is
// relayed to the proxy's unix socket Socket on the host.
// Policy names the egress policy of the runs (agent and list): runs in
// one jail share its loopback and see each other's processes, so runs of
// different egress policies never share one.
type EgressRelay struct {
	Socket string `json:"socket"`
	Addr   string `json:"addr"`
	Policy string `json:"policy,omitempty"`
}

// has says whether o builds layer l.
func (o *Options) has(l confine.Layer) bool { return slices.Contains(o.Layers, l) }

// Key is the digest of everything that makes a jail: two runs share a
// jail only when their keys are equal, so a policy change (another
// confinement, another writable root or cwd root) never runs under a
// jail built for the old one.
func (o *Options) Key() string {
	b, _ := json.Marshal(o) // plain data: never fails
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// procs is the jail's process bound.
func (o *Options) procs() uint64 {
	if p := o.Confine.Limits.Procs; p > 0 {
		return p
	}
	return DefaultProcs
}

// Missing are the layers a jail for c that holds held lacks: every layer
// but the network one, which applies to network none only. The policy
// decides whether a missing layer refuses the run or warns.
func Missing(c *confine.Confinement, held []confine.Layer) []confine.Layer {
	var out []confine.Layer
	for _, l := range AllLayers {
		if l == confine.LayerNetwork && c.Network != confine.NetworkNone {
			continue
		}
		if !slices.Contains(held, l) {
			out = append(out, l)
		}
	}
	return out
}
