package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/exechost/exechost/internal/hint"
)

// Access rights, by what they let a run do.
const (
	// readFile lets a file be read and executed (ABI 1).
	readFile = ll.AccessFSExecute | ll.AccessFSReadFile
	// writeFile lets a file be written and truncated (ABI 1, 3) and a
	// device's ioctls be used (ABI 5).
	writeFile = ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
	// writeDir lets entries be created, removed, renamed and linked
	// beneath a directory (ABI 1, REFER ABI 2).
	writeDir = ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeChar |
		ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo |
		ll.AccessFSMakeBlock | ll.AccessFSMakeSym | ll.AccessFSRefer
	// resolveUnix lets a run connect to pathname unix sockets beneath a
	// directory (ABI 9; before it such connects are not restricted).
	resolveUnix = ll.AccessFSResolveUnix
	fileRights  = readFile | writeFile
	readRights  = readFile
	allRights   = readFile | ll.AccessFSReadDir | writeFile | writeDir | resolveUnix
)

// devWritable are device files every run may write (and use the ioctls
// of), whatever its writable roots: output discarded to /dev/null, its own
// controlling terminal. Not /dev/pts: writing to (or pushing input into,
// TIOCSTI) another of the user's terminals is a way out. A run started on
// a pseudo-terminal keeps using the one it was given (descriptors opened
// before the restriction are not checked again).
var devWritable = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty"}

// Builder builds the Landlock rules of a Confinement and applies them.
// The zero value is ready to use; ApplyProcess and ApplyThread use a fresh
// one for each call.
//
// The rules around the protected set name files met while listing the
// directories down to it, so the walk never opens a name twice or follows
// one: each directory is opened from its parent's descriptor with
// O_NOFOLLOW, each entry beside the protected path is opened from its
// directory's descriptor with O_PATH|O_NOFOLLOW, and the rule is given
// that descriptor, not the name. An entry whose opened type is not the one
// the listing gave (swapped since: for a symbolic link, a file for a
// directory) is not granted, nor is a directory that is the protected one
// or one on the way to it (same device and inode: a bind mount of it, or
// one moved into place). A symbolic link beside the protected path is not
// granted (Landlock cannot grant a link itself, only where it points):
// paths through it are refused, while its target keeps what it is granted
// where it really is.
//
// A confinement is enforced as two Landlock layers, whose intersection is
// what the run may do: the base layer grants every right around the
// protected set (it depends on nothing else), the run's layer grants read
// everywhere, every right beneath the writable roots and the devices, and
// handles the network. The base layer is the costly one (a listing of
// every directory down to each protected path and a rule per entry): a
// Builder keeps the last one it built and reuses it while it is still
// exact (see base), unless Afresh is set.
type Builder struct {
	// Afresh builds the base layer for every ruleset instead of reusing
	// the last one.
	Afresh bool

	// between, when set, runs after a directory around the protected
	// set has been listed and before its entry name is opened: a test
	// changes the entry there, as a racing process would.
	between func(dir, name string)
	// clock reads the coarse real-time clock file times are taken from
	// (CLOCK_REALTIME_COARSE when nil); tests fix it.
	clock func() unix.Timespec

	mu     sync.Mutex
	last   *baseLayer // the base layer kept for reuse, nil when none
	builds int        // base layers built (for tests)
}

// fileID is a file's identity: its device and inode.
type fileID struct{ dev, ino uint64 }

func idOf(st *unix.Stat_t) fileID { return fileID{uint64(st.Dev), st.Ino} } // Dev is narrower on some architectures

// emitFunc takes one rule: the file at path, open as fd (the caller's,
// valid until emitFunc returns), granted rights beneath it.
type emitFunc func(path string, fd int, rights landlock.AccessFSSet) error

// baseGrants passes emit the rules of the base layer around the protected
// set: listing everywhere, every right on everything but the protected
// paths (and the directories down to them, beyond their entries).
func (w *walk) baseGrants() error {
	w.identify()
	if err := w.path("/", ll.AccessFSReadDir, false); err != nil {
		return err
	}
	return w.around("/", allRights)
}

// runGrants passes emit the rules of c's own layer (c already resolved):
// listing, read and execute everywhere, every right beneath the writable
// roots and the writable devices. With a protected set, the base layer
// keeps them out of it; without one, this layer alone is the
// confinement.
func runGrants(c *Confinement, emit emitFunc) error {
	w := &walk{emit: emit}
	if err := w.path("/", readRights|ll.AccessFSReadDir, false); err != nil {
		return err
	}
	for _, r := range append(slices.Clone(c.Writable), devWritable...) {
		if err := w.path(r, allRights, false); err != nil {
			return err
		}
	}
	return nil
}

// walk is one building of rules: the protected set, the identities the
// rules must not reach, where the rules go and, for a base layer kept for
// reuse, the directories listed.
type walk struct {
	b         *Builder
	protected []string
	// guarded are the protected files' identities; onTheWay, those of
	// the directories that contain them (from /).
	guarded, onTheWay map[fileID]bool
	emit              emitFunc
	// record keeps each directory listed in seen; racy is set when one
	// changed too recently for its times to tell a later change (see
	// base).
	record bool
	since  unix.Timespec
	seen   []seenDir
	racy   bool
}

// identify records the identities of the protected paths and of the
// directories down to them (a path missing now has none).
func (w *walk) identify() {
	w.guarded, w.onTheWay = map[fileID]bool{}, map[fileID]bool{}
	var st unix.Stat_t
	for _, p := range w.protected {
		if unix.Stat(p, &st) == nil {
			w.guarded[idOf(&st)] = true
		}
		for d := filepath.Dir(p); ; d = filepath.Dir(d) {
			if unix.Stat(d, &st) == nil {
				w.onTheWay[idOf(&st)] = true
			}
			if d == "/" || d == "." {
				break
			}
		}
	}
}

// around passes emit the rules granting rights beneath root, except
// beneath the protected paths: root itself when nothing protected lies
// beneath it, else each of its entries the same way (see the package
// documentation). A root inside the protected set gets nothing; a root
// that does not exist, or is a symbolic link, is skipped.
func (w *walk) around(root string, rights landlock.AccessFSSet) error {
	if under(root, w.protected) {
		return nil
	}
	if !containsAny(root, w.protected) {
		return w.path(root, rights, true)
	}
	// A root is a path from the policy, resolved (Confinement.Resolve);
	// beneath it nothing is opened by name but from its directory.
	fd, st, err := openStat(unix.AT_FDCWD, root, root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
	if err != nil || fd < 0 {
		return err
	}
	defer unix.Close(fd)
	if w.guarded[idOf(&st)] {
		return nil
	}
	return w.dir(fd, root, rights)
}

// path passes emit the rule granting rights beneath the root p, opened by
// name without following a last symbolic link (a link is skipped, as is a
// missing path); check refuses a file on the way to the protected set.
func (w *walk) path(p string, rights landlock.AccessFSSet, check bool) error {
	fd, st, err := openStat(unix.AT_FDCWD, p, p, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil || fd < 0 {
		return err
	}
	defer unix.Close(fd)
	t := typeOf(st.Mode)
	if t&fs.ModeSymlink != 0 || check && (w.guarded[idOf(&st)] || w.onTheWay[idOf(&st)]) {
		return nil
	}
	if !t.IsDir() {
		rights &= fileRights
	}
	return w.emit(p, fd, rights)
}

// dir passes emit the rules for the entries of the directory open as dfd
// (at path), which contains a protected path.
func (w *walk) dir(dfd int, path string, rights landlock.AccessFSSet) error {
	if w.record {
		// Its times before its listing: any change after this one
		// moves them (see base).
		if err := w.keep(dfd, path); err != nil {
			return err
		}
	}
	lfd, err := unix.Openat(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("confine: list %s around the protected set: %w", path, err)
	}
	f := os.NewFile(uintptr(lfd), path)
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return fmt.Errorf("confine: list %s around the protected set: %w", path, err)
	}
	for _, e := range entries {
		if err := w.entry(dfd, path, e.Name(), e.Type(), rights); err != nil {
			return err
		}
	}
	return nil
}

// entry passes emit the rules for the entry name of the directory open as
// dfd (at dir), listed with type listed.
func (w *walk) entry(dfd int, dir, name string, listed fs.FileMode, rights landlock.AccessFSSet) error {
	p := filepath.Join(dir, name)
	if listed&fs.ModeSymlink != 0 || under(p, w.protected) {
		// A link is not granted (see Builder).
		return nil
	}
	if w.b.between != nil {
		w.b.between(dir, name)
	}
	descend := listed.IsDir() && containsAny(p, w.protected)
	flags := unix.O_PATH | unix.O_NOFOLLOW
	if descend {
		flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW
	}
	fd, st, err := openStat(dfd, name, p, flags)
	if err != nil || fd < 0 {
		return err
	}
	defer unix.Close(fd)
	id := idOf(&st)
	switch {
	case typeOf(st.Mode) != listed, w.guarded[id]:
		// Swapped since the listing (a link opened as itself), or
		// the protected file itself under another name.
		return nil
	case descend:
		return w.dir(fd, p, rights)
	case w.onTheWay[id]:
		return nil
	case !listed.IsDir():
		rights &= fileRights
	}
	return w.emit(p, fd, rights)
}

// openStat opens name relative to dfd (close-on-exec, with flags) and
// stats it; p names it in errors. A file gone or changed to another type
// since it was named (ENOENT, ELOOP, ENOTDIR) gives fd -1 and no error:
// nothing is granted for it.
func openStat(dfd int, name, p string, flags int) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := unix.Openat(dfd, name, flags|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		return -1, st, nil
	case err != nil:
		return -1, st, fmt.Errorf("confine: open %s: %w", p, err)
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, fmt.Errorf("confine: %s: %w", p, err)
	}
	return fd, st, nil
}

// typeOf is the type bits of a stat(2) mode, as a listing gives them.
func typeOf(mode uint32) fs.FileMode {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	case unix.S_IFREG:
		return 0
	}
	return fs.ModeIrregular
}

// containsAny reports whether a protected path lies strictly beneath dir.
func containsAny(dir string, protected []string) bool {
	for _, p := range protected {
		if p != dir && within(p, dir) {
			return true
		}
	}
	return false
}

// config is the ruleset's handled rights (best effort: the kernel's ABI
// drops what it does not know).
func (c *Confinement) config(abi int) landlock.Config {
	handled := landlock.AccessFSSet(allRights)
	if abi < 2 {
		// go-landlock's best effort drops the whole ruleset for a rule
		// asking REFER on ABI 1; without it such moves are refused.
		handled &^= ll.AccessFSRefer
	}
	// Abstract unix sockets and signals stay within a confined run
	// whatever its network (ABI 6): a run given the network (npm install)
	// must not stop the node, the gateway or the approver either. A run
	// that writes everywhere (security=full without a "confine" member:
	// only the protected set out of reach) keeps the session's abstract
	// sockets (X11, D-Bus) and signals, as docs/policy.md says.
	cfg := landlock.Config{HandledAccessFS: handled}
	if !c.writesAll() {
		cfg.Scoped = ll.ScopeAbstractUnixSocket | ll.ScopeSignal
	}
	if c.network() == NetworkNone {
		cfg.HandledAccessNet = ll.AccessNetBindTCP | ll.AccessNetConnectTCP
	}
	return cfg.BestEffort()
}

// layer is one Landlock ruleset to enforce, with its flags.
type layer struct {
	fd    int
	flags uint32
	// handed is a base layer this process was handed (Confinement.Base):
	// apply closes it, not closeLayers.
	handed bool
}

// layers returns the rulesets that enforce c, the caller's to close: c's
// own layer and, with a protected set, the base layer around it (see
// Builder): handed (a ruleset descriptor, takeBase's) when it is not -1,
// else built here. None when there is nothing to enforce.
func (b *Builder) layers(c *Confinement, abi int, handed int) ([]layer, error) {
	cfg := c.config(abi)
	fd, flags, err := cfg.NewRulesetFD()
	if err != nil || fd < 0 {
		return nil, err
	}
	ls := []layer{{fd: fd, flags: flags}}
	// The rights the ruleset handles: the ones asked for that this
	// kernel knows (go-landlock's best effort asks the kernel, too).
	handled := cfg.HandledAccessFS & fsRightsOf(KernelABI())
	err = runGrants(c, func(p string, pfd int, rights landlock.AccessFSSet) error {
		return addRule(fd, p, pfd, rights&handled)
	})
	switch {
	case err != nil, len(c.Protected) == 0:
	case handed >= 0:
		// Built for exactly this protected set and these handled
		// rights by the runner's Builder (Builder.Base); its flags
		// are the base layer's, none.
		ls = append(ls, layer{fd: handed, handed: true})
	default:
		var base layer
		if base, err = b.base(c.Protected, cfg.HandledAccessFS, handled); err == nil {
			ls = append(ls, base)
		}
	}
	if err != nil {
		closeLayers(ls)
		return nil, err
	}
	return ls, nil
}

func closeLayers(ls []layer) {
	for _, l := range ls {
		if !l.handed {
			unix.Close(l.fd)
		}
	}
}

// addRule adds to the ruleset rs the rule granting rights beneath the
// file open as fd (at p, for errors).
func addRule(rs int, p string, fd int, rights landlock.AccessFSSet) error {
	if rights == 0 {
		return nil
	}
	attr := ll.PathBeneathAttr{ParentFd: fd, AllowedAccess: uint64(rights)}
	if err := ll.LandlockAddPathBeneathRule(rs, &attr, 0); err != nil {
		return fmt.Errorf("confine: landlock_add_rule %s: %w", p, err)
	}
	return nil
}

// fsRightsOf is the file system rights Landlock ABI abi knows (as
// go-landlock's table says).
func fsRightsOf(abi int) landlock.AccessFSSet {
	n := 0
	switch {
	case abi >= 9:
		n = 17 // RESOLVE_UNIX
	case abi >= 5:
		n = 16 // IOCTL_DEV
	case abi >= 3:
		n = 15 // TRUNCATE
	case abi == 2:
		n = 14 // REFER
	case abi == 1:
		n = 13
	}
	return landlock.AccessFSSet(1<<n - 1)
}

// KernelABI returns the Landlock ABI version this kernel offers, 0 when it
// has none (or Landlock is not enabled at boot).
//
// The kernel is asked once per process (a landlock_create_ruleset version
// probe) and the answer kept process-wide rather than by each owner (an
// engine, a Builder): it is a property of the running kernel, the same for
// every caller, and cannot change while the process runs (Landlock is
// enabled or not at boot, and a process cannot change kernels). A daemon
// then probes once, not several times per confined run.
func KernelABI() int { return kernelABI() }

var kernelABI = sync.OnceValue(func() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
})

// ApplyProcess restricts every thread of the calling process to c (and
// sets its limits), for good: what it runs afterwards inherits it. abi is
// the kernel's (KernelABI); a kernel c cannot be enforced on fails as
// Check says. The returned warning is for the run's stderr.
func ApplyProcess(c *Confinement, abi int) (string, error) {
	// Afresh: nothing is kept (no ruleset or directory descriptor stays
	// open in the process afterwards).
	return (&Builder{Afresh: true}).ApplyProcess(c, abi)
}

// ApplyThread restricts the calling thread, which must be locked to its
// goroutine for good and must execve(2) next (the launcher, the bubblewrap
// sandbox's helper): the new program inherits the thread's Landlock domain
// and no_new_privs, while the process's other threads stay unrestricted.
func ApplyThread(c *Confinement, abi int) (string, error) {
	return (&Builder{Afresh: true}).ApplyThread(c, abi)
}

// ApplyProcess is the package's ApplyProcess with rules built by b.
func (b *Builder) ApplyProcess(c *Confinement, abi int) (string, error) {
	return b.apply(c, abi, restrictProcess)
}

// ApplyThread is the package's ApplyThread with rules built by b.
func (b *Builder) ApplyThread(c *Confinement, abi int) (string, error) {
	return b.apply(c, abi, func(fd int, flags uint32) error {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
		}
		return ll.LandlockRestrictSelf(fd, flags)
	})
}

// restrictProcess enforces the ruleset fd on every thread of this process,
// as go-landlock's Config.Restrict does.
func restrictProcess(fd int, flags uint32) error {
	abi := KernelABI()
	if abi < 8 {
		if err := ll.AllThreadsPrctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
		}
		return ll.AllThreadsLandlockRestrictSelf(fd, flags)
	}
	flags |= ll.FlagRestrictSelfTSync
	if abi >= 11 {
		flags |= ll.FlagRestrictSelfNoNewPrivs
	} else {
		// The kernel sets no_new_privs on the other threads when the
		// enforcement succeeds.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
		}
	}
	return ll.LandlockRestrictSelf(fd, flags)
}

// ApplyForkingThread is ApplyThread for a thread that forks the command
// and stays in this process (the runner's in-thread start): a
// confinement with resource limits is refused (nothing applied), because
// setrlimit(2) would set them on this whole process rather than on the
// command alone. InThread never sends such a one here; this keeps a
// caller that decided otherwise from lowering its own process's limits.
func (b *Builder) ApplyForkingThread(c *Confinement, abi int) (string, error) {
	if c.Limits != (Limits{}) {
		return "", fmt.Errorf("confine: cannot start the command in-thread: %s", limitsPerProcess)
	}
	return b.ApplyThread(c, abi)
}

func (b *Builder) apply(c *Confinement, abi int, restrict func(fd int, flags uint32) error) (string, error) {
	// First, before anything here opens a descriptor that could take
	// the number c.Base names (see takeBase).
	handed := c.takeBase(abi)
	if handed >= 0 {
		defer unix.Close(handed)
	}
	if !c.Active() {
		return "", nil
	}
	if err := c.Validate(); err != nil {
		return "", err
	}
	warning, err := c.Check(abi)
	if err != nil {
		return "", err
	}
	if err := c.Limits.set(); err != nil {
		return "", err
	}
	if abi == 0 {
		return warning, nil
	}
	ls, err := b.layers(c, abi, handed)
	if err != nil {
		return "", err
	}
	defer closeLayers(ls)
	for _, l := range ls {
		// A failure after the first layer leaves this thread (or
		// process) restricted by it: nothing runs either way.
		if err := restrict(l.fd, l.flags); err != nil {
			if errors.Is(err, unix.E2BIG) {
				// Each run adds two layers of the kernel's 16.
				return "", hint.Wrap(fmt.Errorf("confine: apply landlock: the process already carries the most Landlock layers the kernel allows: %w", err), "run exechost outside so many nested Landlock sandboxes")
			}
			return "", fmt.Errorf("confine: apply landlock: %w", err)
		}
	}
	return warning, nil
}

// set applies the limits to this process.
func (l Limits) set() error {
	for _, r := range []struct {
		res int
		v   uint64
		nm  string
	}{{unix.RLIMIT_NPROC, l.Procs, "procs"}, {unix.RLIMIT_NOFILE, l.Files, "files"}, {unix.RLIMIT_FSIZE, l.FileSize, "fileSize"}} {
		if r.v == 0 {
			continue
		}
		if err := unix.Setrlimit(r.res, &unix.Rlimit{Cur: r.v, Max: r.v}); err != nil {
			return fmt.Errorf("confine: limit %s to %d: %w", r.nm, r.v, err)
		}
	}
	return nil
}

// Supported says this platform can confine (Landlock is Linux's; whether
// this kernel offers it is KernelABI's answer).
const Supported = true
