// Package bwrap is the daemonless sandbox backend for machines without
// Docker, and the default of `exechost up` when no daemon answers. Every
// command runs in fresh Linux namespaces (user, mount, pid, network, ipc,
// uts, cgroup) with a read-only view of the host's system directories, a
// writable /workspace and a private /tmp.
//
// Why bubblewrap (Debian's bubblewrap package) and not namespace setup
// written here: bwrap is the battle-tested setuid-free sandbox under
// Flatpak and many CI systems; it gets the fiddly, security-critical parts
// right (pivot_root ordering, mount propagation, /proc and /dev in the new
// pid namespace, --die-with-parent, refusing setuid surprises), and a Go
// program cannot safely fork-then-unshare itself anyway (the runtime is
// multi-threaded). exechost adds what bwrap does not do, in a re-exec of its
// own binary inside the sandbox (the helper, see helper_linux.go) just
// before it executes the command:
//
//   - no_new_privs, so nothing in the sandbox can gain privileges through
//     setuid binaries;
//   - Landlock (when the kernel has it): writes only under /workspace, /tmp
//     and /dev, no TCP, no connecting to pathname unix sockets outside those
//     directories (ABI 9+), no signals or abstract sockets outside the
//     sandbox (ABI 6+);
//   - a process limit: RLIMIT_NPROC, which since Linux 5.14 counts
//     processes per user *namespace*, so the limit applies to this sandbox
//     alone. A cgroup v2 pids limit would need a delegated cgroup subtree
//     (systemd Delegate=yes) that exechost does not own, so it is not used.
//
// The view of the host is deliberately not the whole root: /home, /root,
// /run, /var and the state directory hold unix sockets (the Docker socket,
// the approval socket) and a read-only mount does not stop connect() on a
// socket. Only /usr, /bin, /sbin, /lib*, /etc and sandbox.bwrap.roBind are
// visible.
//
// bwrap runs as the gateway's own user, in a fresh user namespace where the
// command is uid 65534. A root gateway needs more care: the kernel exempts
// host uid 0 from RLIMIT_NPROC, and a file owner's permission bits would let
// a root process read root-only files (/etc/shadow), so the sandbox must not
// be host root. Starting bwrap itself as 65534 is not possible (it must
// resolve the workspace inside the 0700 state directory, and its --bind-fd
// needs /proc access an unprivileged user namespace does not get). So a root
// gateway runs two stages: bwrap, privileged, sets up the view and the
// namespaces; the helper drops to host uid 65534 (groups, gid, uid, empty
// capability bounding set) and runs bwrap again, unprivileged, which adds
// the user namespace; the second helper applies the limits and Landlock.
// Where unprivileged user namespaces are disabled, a root gateway falls
// back to the first stage alone (no user namespace, and the process limit
// is shared by every process of host uid 65534); doctor says so.
package bwrap

import "errors"

// Errors callers can test with errors.Is.
var (
	// ErrUnavailable means the backend cannot run on this machine (no
	// bwrap, no user namespaces, not Linux).
	ErrUnavailable = errors.New("daemonless sandbox unavailable")
	// ErrSetup means bwrap or the helper failed before the command ran;
	// the command did not run, on the host or anywhere else.
	ErrSetup = errors.New("daemonless sandbox setup failed")
	// ErrClosed is returned by Exec after Close.
	ErrClosed = errors.New("daemonless sandbox closed")
)

// Report is what the helper achieved inside a sandbox, as measured there.
type Report struct {
	// UID is the user id inside the sandbox.
	UID int `json:"uid"`
	// NoNewPrivs reports PR_SET_NO_NEW_PRIVS.
	NoNewPrivs bool `json:"noNewPrivs"`
	// LandlockABI is the kernel's Landlock ABI version (0: none).
	LandlockABI int `json:"landlockABI"`
	// Landlock says what Landlock enforcement was applied, or why not.
	Landlock string `json:"landlock"`
	// NProc is the RLIMIT_NPROC applied (0: none).
	NProc uint64 `json:"nproc"`
	// AddressSpace is the RLIMIT_AS applied (0: none).
	AddressSpace uint64 `json:"addressSpace"`
}

// helperFlag is the first argument that turns any binary importing this
// package into the in-sandbox helper. Nothing else passes it.
const helperFlag = "--exechost-sandbox-helper=v1"
