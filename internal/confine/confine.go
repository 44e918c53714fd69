// Package confine is the one seam between a run's confinement and the
// kernel: it turns a Confinement (writable roots, a protected set that is
// neither readable nor writable, the network a run may use, what to do on a
// kernel that cannot enforce it, resource limits) into a Landlock ruleset
// (github.com/landlock-lsm/go-landlock) and applies it in the process that
// starts the command, before its first exec. Everything a confined process
// starts inherits the restriction; nothing it runs can lift it.
//
// Two apply points use it:
//
//   - the interpreter process (internal/shellrun) calls ApplyProcess at its
//     entry, restricting every thread of that Go process, before it runs
//     anything;
//   - a command that starts directly (and /bin/sh -c text) starts either
//     in-thread or through the launcher, as InThread decides (the runner
//     asks it, runner.Spec.Confine). In-thread, the runner restricts a
//     fresh thread of its own with ApplyThread (that thread is never
//     unlocked from its goroutine, so it serves nothing else and ends
//     with it) and forks the command from it: the child inherits the
//     thread's Landlock domain and no_new_privs, the host's other threads
//     stay unrestricted, and the thread parks until the command is
//     reaped, because the parent-death signal fires when the forking
//     thread exits. Through the launcher, Wrap prefixes the argv with
//     this binary and Arg, and the launcher's init restricts its one
//     locked thread and execve(2)s the command (about 6 ms more per run:
//     a second start of this binary). Either way the command's image
//     starts confined. The launcher and the interpreter may be handed
//     the base layer (see Builder) as a ruleset descriptor
//     (Confinement.Base, Builder.Base) and then build only their own.
//
// Landlock grants access beneath paths; it cannot subtract. The protected
// set is kept out of reach by a layer of its own (Landlock layers
// intersect) that grants every right on the directory tree *around* it:
// / is not granted itself; its entries are, each one recursively the same
// way, except the protected path. The run's own layer grants read and
// execute everywhere and write beneath the writable roots. Symbolic links
// met on the way are not granted (their targets are granted where they
// really are). Beneath a root nothing is opened by name: each entry is
// opened from its directory's descriptor without following a link, and
// its rule is given that descriptor (see Builder). Listing directories (READ_DIR) is granted on the whole tree,
// so the protected directory's file names can be listed; its files cannot
// be opened, executed, written, truncated, renamed, linked or removed.
// Without that grant `ls /` and `ls ~` would fail for every confined run.
//
// The minimum Landlock ABI each part needs (MinABI reports the most a
// Confinement needs):
//
//   - file system rules (read, write, execute beneath paths): ABI 1
//     (Linux 5.13); renames and links between directories of a writable
//     root need ABI 2 (REFER, 5.19; on ABI 1 they are always refused);
//     truncate(2) of a file outside the writable roots is refused only
//     from ABI 3 (6.2), so the protected set needs ABI 3 to stay unchanged;
//   - network none (no TCP bind or connect): ABI 4 (6.7); UDP and other
//     protocols are not restricted before ABI 10;
//   - ioctl on devices: ABI 5 (6.10);
//   - abstract unix sockets and signals to processes outside the run:
//     ABI 6 (6.12); connecting to pathname unix sockets: ABI 9.
package confine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/exechost/exechost/internal/hint"
)

// Network is what network a confined run may use.
type Network string

// Network values.
const (
	// NetworkNone refuses TCP bind and connect (Landlock ABI 4).
	NetworkNone Network = "none"
	// NetworkLoopback is asked for by a policy that wants local services
	// only. Landlock filters TCP by port, not by address, so it cannot be
	// enforced as asked: it runs as NetworkAll, and Describe says so.
	NetworkLoopback Network = "loopback"
	// NetworkAll leaves the network unrestricted.
	NetworkAll Network = "all"
)

// Unsupported says what happens when the kernel cannot enforce a
// Confinement (no Landlock, or an ABI older than MinABI).
type Unsupported string

// Unsupported values.
const (
	// UnsupportedDeny refuses the run (the default).
	UnsupportedDeny Unsupported = "deny"
	// UnsupportedWarn runs it with what the kernel can enforce and says
	// what is missing.
	UnsupportedWarn Unsupported = "warn"
)

// ErrUnsupported is the error of a Confinement the kernel cannot enforce
// under UnsupportedDeny.
var ErrUnsupported = errors.New("confinement not supported by this kernel")

// Confinement is what one run may touch. The zero value confines nothing
// (Active is false).
type Confinement struct {
	// Writable are the roots beneath which the run may write (absolute,
	// symbolic links resolved by Resolve). "/" writes everywhere except
	// the protected set.
	Writable []string `json:"writable,omitempty"`
	// Protected are paths the run can neither read nor write, whatever
	// Writable says.
	Protected []string `json:"protected,omitempty"`
	// Network is the network the run may use; "" is NetworkAll.
	Network Network `json:"network,omitempty"`
	// Hidden are paths the run cannot see at all: the default hidden set
	// of secrets plus confine.hidden, less confine.readable (the host
	// computes the list). The jail's view leaves them out; Landlock alone
	// refuses every access beneath them, as for Protected.
	Hidden []string `json:"hidden,omitempty"`
	// ReadOnly are persistence paths that stay read-only (contents and
	// metadata) even inside a writable root: .git/hooks, .git/config,
	// shell start-up files, authorized_keys, autostart entries, less what
	// the policy opens deliberately.
	ReadOnly []string `json:"readOnly,omitempty"`
	// Sockets are the named unix sockets (confine.sockets) a run may still
	// reach; every other socket directory ($XDG_RUNTIME_DIR, /run,
	// /var/run, /tmp/.X11-unix, /tmp/tmux-*, …) is absent from its view.
	Sockets []string `json:"sockets,omitempty"`
	// Unsupported is what happens on a kernel that cannot enforce this;
	// "" is UnsupportedDeny.
	Unsupported Unsupported `json:"unsupported,omitempty"`
	// Limits are resource limits set before the command starts.
	Limits Limits `json:"limits,omitzero"`
	// Exec is the path the launcher gives execve when it is not the
	// program's argv[0]: the runner's descriptor path of the file decided
	// on (runner.Pin), inherited by the launcher. Not policy: set per run.
	Exec string `json:"exec,omitempty"`
	// Base, when set, is the descriptor (inherited, or received with a
	// warm process's hand-over) holding the base layer of this
	// confinement, the rules around Protected that the runner's Builder
	// built and keeps (Builder.Base): the process applying it then builds
	// only its own layer. A descriptor that is not a Landlock ruleset, or
	// whose BaseFor is not this confinement's, is ignored and the base
	// layer built here (fail closed); one that is is used, made
	// close-on-exec and closed once applied. Not policy: set per run by
	// the runner, with BaseFor, by BaseLayer.Hand.
	Base int `json:"base,omitempty"`
	// BaseFor says what the base layer at Base was built for (a digest
	// of its protected set and handled rights, BaseLayer.Hand's): the
	// process applying this confinement uses that layer only when it is
	// the digest of its own.
	BaseFor string `json:"baseFor,omitempty"`
}

// ErrBaseMismatch is the error of a base layer handed with a confinement
// it was not built for (BaseLayer.Hand): another protected set, or other
// handled rights.
var ErrBaseMismatch = errors.New("base layer built for another confinement")

// BaseLayer is the base layer of a confinement (the rules around its
// protected set, see Builder) as Builder.Base gives it, to be handed to a
// process that applies that confinement itself (the launcher, the
// interpreter), with what it was built for: it fits only a confinement
// with the same protected set and handled rights, and Hand refuses any
// other, so that a process is never handed the rules around another
// protected set.
type BaseLayer struct {
	file      *os.File
	protected []string // what it was built for, for errors
	key       string   // c.baseKey(abi) of the confinement it was built for
	abi       int
}

// File is the ruleset's descriptor, for the process it is handed to (at
// the number Hand was given). Nil for a nil BaseLayer.
func (l *BaseLayer) File() *os.File {
	if l == nil {
		return nil
	}
	return l.file
}

// Close closes l's descriptor; the ruleset its Builder keeps stays open.
func (l *BaseLayer) Close() error {
	if l == nil {
		return nil
	}
	return l.file.Close()
}

// Hand returns a copy of c naming l as its base layer at descriptor fd
// (Base, BaseFor), for the process that will have l's File there, or an
// error wrapping ErrBaseMismatch when l was built for another confinement
// (protected set or handled rights): c must not be applied with it.
func (l *BaseLayer) Hand(c *Confinement, fd int) (*Confinement, error) {
	if key := c.baseKey(l.abi); key != l.key {
		return nil, fmt.Errorf("confine: %w: built for protected %q, handed with protected %q", ErrBaseMismatch, l.protected, c.Protected)
	}
	run := *c
	run.Base, run.BaseFor = fd, digest(l.key)
	return &run, nil
}

// digest is the BaseFor of a base layer key: short enough for an argv.
func digest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16])
}

// Limits are resource limits (setrlimit(2)); zero leaves one unchanged.
// Each is set as both the soft and the hard limit, so the command cannot
// raise it again.
type Limits struct {
	// Procs bounds the processes of the host user (RLIMIT_NPROC).
	Procs uint64 `json:"procs,omitempty"`
	// Files bounds open descriptors (RLIMIT_NOFILE).
	Files uint64 `json:"files,omitempty"`
	// FileSize bounds the size of a file the command writes (RLIMIT_FSIZE).
	FileSize uint64 `json:"fileSize,omitempty"`
}

// Active reports whether c restricts anything.
func (c *Confinement) Active() bool {
	return c != nil && (len(c.Protected) > 0 || !c.writesAll() || c.network() == NetworkNone || c.Limits != Limits{})
}

func (c *Confinement) writesAll() bool { return slices.Contains(c.Writable, "/") }

func (c *Confinement) network() Network {
	if c.Network == "" {
		return NetworkAll
	}
	return c.Network
}

func (c *Confinement) unsupported() Unsupported {
	if c.Unsupported == "" {
		return UnsupportedDeny
	}
	return c.Unsupported
}

// Validate checks c's values; its errors name the field.
func (c *Confinement) Validate() error {
	switch c.Network {
	case "", NetworkNone, NetworkLoopback, NetworkAll:
	default:
		return fmt.Errorf("confine.network %q: must be none, loopback or all", c.Network)
	}
	switch c.Unsupported {
	case "", UnsupportedDeny, UnsupportedWarn:
	default:
		return fmt.Errorf("confine.unsupported %q: must be deny or warn", c.Unsupported)
	}
	for _, p := range c.Writable {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("confine.writable %q: must be an absolute path (or start with ~/)", p)
		}
	}
	for _, p := range c.Protected {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("confine protected path %q: must be absolute", p)
		}
	}
	for _, l := range []struct {
		field string
		ps    []string
	}{{"confine.hidden", c.Hidden}, {"confine read-only path", c.ReadOnly}, {"confine.sockets", c.Sockets}} {
		for _, p := range l.ps {
			if !filepath.IsAbs(p) {
				return fmt.Errorf("%s %q: must be an absolute path (or start with ~/)", l.field, p)
			}
		}
	}
	return nil
}

// Resolve returns c with every path cleaned and its symbolic links
// resolved (a path that does not exist yet is kept as cleaned; a relative
// one, which Validate refuses, is not looked up at all), so the rules
// compare real paths: a protected directory reached through a link
// is still protected. Writable roots inside the protected set are dropped
// and reported, because no policy can grant them.
func (c Confinement) Resolve() (Confinement, []string) {
	c.Protected = realPaths(c.Protected)
	var dropped []string
	var w []string
	for _, p := range realPaths(c.Writable) {
		if under(p, c.Protected) {
			dropped = append(dropped, p)
			continue
		}
		w = append(w, p)
	}
	c.Writable = w
	return c, dropped
}

// WithProtected returns c, which Resolve returned, with p added to the
// protected set as Resolve adds one (its real path), and the writable
// roots inside it dropped as Resolve drops them. Only p is looked up.
func (c Confinement) WithProtected(p string) Confinement {
	for _, r := range realPaths([]string{p}) {
		if slices.Contains(c.Protected, r) {
			continue
		}
		c.Protected = append(slices.Clone(c.Protected), r)
		c.Writable = slices.DeleteFunc(slices.Clone(c.Writable), func(w string) bool { return within(w, r) })
	}
	return c
}

// WithWritable returns c, which Resolve returned, with p added as a
// writable root as Resolve adds one (its real path; dropped inside the
// protected set, or when it is one already). Only p is looked up.
func (c Confinement) WithWritable(p string) Confinement {
	for _, r := range realPaths([]string{p}) {
		if !under(r, c.Protected) && !slices.Contains(c.Writable, r) {
			c.Writable = append(slices.Clone(c.Writable), r)
		}
	}
	return c
}

func realPaths(ps []string) []string {
	var out []string
	for _, p := range ps {
		p = filepath.Clean(p)
		// A relative path names nothing here (Validate refuses it): it
		// is a placeholder in a description (the host's "$TMPDIR"), and
		// looking it up would stat a file of that name in this process's
		// working directory.
		if filepath.IsAbs(p) {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				p = r
			}
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// under reports whether p is one of roots or beneath one.
func under(p string, roots []string) bool {
	for _, r := range roots {
		if within(p, r) {
			return true
		}
	}
	return false
}

// within reports whether p is root or beneath it (both clean, absolute).
func within(p, root string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}

// MinABI is the Landlock ABI c needs to be enforced as described: 3 for
// any file system rule (so truncate(2) outside the writable roots is
// refused too), 4 for network none, 0 when c restricts nothing.
func (c *Confinement) MinABI() int {
	switch {
	case !c.Active():
		return 0
	case c.network() == NetworkNone:
		return 4
	}
	return 3
}

// Check says whether a kernel offering Landlock ABI abi can enforce c: nil
// when it can; an error wrapping ErrUnsupported (with a hint) when it
// cannot and c says deny; for warn, a nil error and the warning to show.
func (c *Confinement) Check(abi int) (warning string, err error) {
	need := c.MinABI()
	if abi >= need {
		return "", nil
	}
	what := fmt.Sprintf("this kernel offers Landlock ABI %d, the run's confinement needs %d", abi, need)
	if abi == 0 {
		what = fmt.Sprintf("this kernel has no Landlock (the run's confinement needs ABI %d)", need)
	}
	if c.unsupported() == UnsupportedWarn {
		return "confinement not fully enforced: " + what, nil
	}
	return "", hint.Wrap(fmt.Errorf("%w: %s", ErrUnsupported, what), "run on Linux 6.7 or later with Landlock enabled (lsm=landlock), or set \"confine\": {\"unsupported\": \"warn\"} in exec-approvals.json to run with what the kernel enforces")
}

// Describe says in one line what c lets a run reach, for prompts,
// `approvals check` and the audit log: Reach with every path as written.
func (c *Confinement) Describe() string { return c.Reach(nil) }

// Reach says in one line what c lets a run reach, parts joined by " · ":
//
//	writes: cwd, tmp · network: none · sockets: none · hidden: 14 secrets · read-only inside: 9 persistence paths · no access: /home/u/.openclaw
//
// names shows some paths by a name instead (the host names the run's cwd
// "cwd" and its private temporary directory "tmp"). An inactive
// confinement is "none". Under a confinement that writes anywhere and
// names no socket and hides nothing there is no view of the machine to
// speak of: sockets are "all". A part never claims more than a
// Confinement holds: which layers enforce it is the caller's to say.
func (c *Confinement) Reach(names map[string]string) string {
	if !c.Active() {
		return "none"
	}
	name := func(p string) string {
		if n, ok := names[p]; ok {
			return n
		}
		return p
	}
	var parts []string
	switch {
	case c.writesAll():
		parts = append(parts, "writes: anywhere")
	case len(c.Writable) == 0:
		parts = append(parts, "writes: nowhere")
	default:
		ws := make([]string, len(c.Writable))
		for i, w := range c.Writable {
			ws[i] = name(w)
		}
		parts = append(parts, "writes: "+strings.Join(ws, ", "))
	}
	switch c.network() {
	case NetworkNone:
		parts = append(parts, "network: none")
	case NetworkLoopback:
		parts = append(parts, "network: loopback asked, runs as all (Landlock filters ports, not addresses)")
	default:
		parts = append(parts, "network: all")
	}
	switch {
	case len(c.Sockets) > 0:
		ss := make([]string, len(c.Sockets))
		for i, s := range c.Sockets {
			ss[i] = name(s)
		}
		parts = append(parts, "sockets: "+strings.Join(ss, ", "))
	case c.writesAll() && len(c.Hidden) == 0:
		parts = append(parts, "sockets: all")
	default:
		parts = append(parts, "sockets: none")
	}
	switch len(c.Hidden) {
	case 0:
		parts = append(parts, "hidden: none")
	case 1:
		parts = append(parts, "hidden: 1 secret")
	default:
		parts = append(parts, fmt.Sprintf("hidden: %d secrets", len(c.Hidden)))
	}
	switch n := len(c.ReadOnly); {
	case n == 1:
		parts = append(parts, "read-only inside: "+name(c.ReadOnly[0]))
	case n > 1:
		parts = append(parts, fmt.Sprintf("read-only inside: %d persistence paths", n))
	}
	if len(c.Protected) > 0 {
		parts = append(parts, "no access: "+strings.Join(c.Protected, ", "))
	}
	for _, w := range c.Writable {
		for _, p := range c.Protected {
			if p != w && within(p, w) && w != "/" {
				// Granted around the protected path (package doc).
				where := name(w)
				if d := filepath.Dir(p); d != w {
					where += " or the directories down to " + d
				}
				parts = append(parts, fmt.Sprintf("no new entries directly in %s (it contains the protected %s; use a subdirectory)", where, p))
			}
		}
	}
	return strings.Join(parts, " · ")
}

// InThread says how a command confined by c starts, the one place that
// decides it: true when a thread of the starting process may be
// restricted to c and fork the command (the runner's in-thread start, no
// new program in between); false, with the reason, when the command must
// start through the launcher (Wrap). The in-thread start leaves the
// forking thread in the command's Landlock domain until the command is
// reaped, and Landlock lets a process reach (ptrace, /proc/PID/task/TID/mem
// and fd, signals) any task of its own domain, so it is used only when
// nothing but Landlock would stop the command from reaching that thread:
//
//   - no resource limits (setrlimit(2) is per process: the launcher sets
//     them in its own process, which becomes the command);
//   - network other than none: network none also scopes signals and
//     abstract unix sockets to the domain (ABI 6), and the command could
//     signal (SIGKILL, SIGSTOP) the host through its forking thread;
//   - the starting process cannot be inspected by the command: it is not
//     dumpable (prctl(PR_SET_DUMPABLE, 0)) and holds no CAP_SYS_PTRACE
//     (which overrides that and which a command started by root keeps),
//     nor, as root, in its bounding set (a root command gets it at exec),
//     so ptrace and /proc access to the forking thread are refused by the
//     kernel's own checks (hostShielded).
//
// Not Supported platforms have no Landlock: false.
func (c *Confinement) InThread() (bool, string) {
	switch {
	case !Supported:
		return false, "no Landlock on this platform"
	case c.Limits != (Limits{}):
		return false, limitsPerProcess
	case c.network() == NetworkNone:
		return false, "network none scopes signals to the run's domain, which the forking thread would share: the command could signal the host"
	}
	return hostShielded()
}

// limitsPerProcess is why a confinement with resource limits never starts
// in-thread (InThread, Builder.ApplyForkingThread).
const limitsPerProcess = "resource limits are per process: set by the launcher in the process that becomes the command"

// Arg makes the binary run as the launcher: os.Args is [exe, Arg,
// confinement JSON, program, args...].
const Arg = "--exechost-confine=v1"

// Wrap returns the argv that starts argv confined by c through the
// launcher (this binary re-executed). argv[0] must be a path (it has a
// slash; a relative one is taken from the working directory, as execve(2)
// does): the launcher searches no PATH. Only where Supported is the
// launcher there.
func Wrap(c *Confinement, argv []string) ([]string, error) {
	if len(argv) == 0 || !strings.Contains(argv[0], "/") {
		return nil, fmt.Errorf("confine: program %q must be a path, not a name to look up", strings.Join(argv[:min(len(argv), 1)], ""))
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("confine: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("confine: find this executable for the launcher: %w", err)
	}
	return append([]string{exe, Arg, string(b)}, argv...), nil
}
