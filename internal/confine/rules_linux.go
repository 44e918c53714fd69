package confine

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
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

// grant is one Landlock path-beneath rule.
type grant struct {
	path   string
	rights landlock.AccessFSSet
}

// grants returns the file system rules of c (already resolved): read and
// execute on everything but the protected set, listing everywhere, and
// every right beneath the writable roots but the protected set.
func (c *Confinement) grants() ([]grant, error) {
	g := []grant{{"/", ll.AccessFSReadDir}}
	var err error
	if g, err = around(g, "/", readRights, c.Protected); err != nil {
		return nil, err
	}
	for _, w := range c.Writable {
		if g, err = around(g, w, allRights, c.Protected); err != nil {
			return nil, err
		}
	}
	for _, d := range devWritable {
		if g, err = around(g, d, allRights, c.Protected); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// around appends to g the rules granting rights beneath root, except
// beneath the protected paths: root itself when nothing protected lies
// beneath it, else each of its entries the same way (see the package
// documentation). A root inside the protected set gets nothing; a root
// that does not exist is skipped.
func around(g []grant, root string, rights landlock.AccessFSSet, protected []string) ([]grant, error) {
	if under(root, protected) {
		return g, nil
	}
	fi, err := os.Lstat(root)
	if err != nil {
		if os.IsNotExist(err) {
			return g, nil
		}
		return nil, fmt.Errorf("confine %s: %w", root, err)
	}
	if !fi.IsDir() {
		if fi.Mode()&os.ModeSymlink != 0 {
			return g, nil
		}
		return append(g, grant{root, rights & fileRights}), nil
	}
	if !containsAny(root, protected) {
		return append(g, grant{root, rights}), nil
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("confine: list %s around the protected set: %w", root, err)
	}
	for _, e := range entries {
		t, p := e.Type(), filepath.Join(root, e.Name())
		switch {
		case t&os.ModeSymlink != 0, under(p, protected):
			// A link is granted where it points, never through it.
		case t.IsDir() && containsAny(p, protected):
			if g, err = around(g, p, rights, protected); err != nil {
				return nil, err
			}
		case t.IsDir():
			// The entry's type from the listing, without an lstat each:
			// the cost of a crowded directory on the way.
			g = append(g, grant{p, rights})
		default:
			g = append(g, grant{p, rights & fileRights})
		}
	}
	return g, nil
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
// drops what it does not know) and its rules.
func (c *Confinement) config(abi int) (landlock.Config, []landlock.Rule, error) {
	handled := landlock.AccessFSSet(allRights)
	if abi < 2 {
		// go-landlock's best effort drops the whole ruleset for a rule
		// asking REFER on ABI 1; without it such moves are refused.
		handled &^= ll.AccessFSRefer
	}
	cfg := landlock.Config{HandledAccessFS: handled}
	gs, err := c.grants()
	if err != nil {
		return cfg, nil, err
	}
	rules := make([]landlock.Rule, 0, len(gs))
	for _, g := range gs {
		// An entry listed but gone by now (a temporary file) is skipped.
		rules = append(rules, landlock.PathAccess(g.rights&handled, g.path).IgnoreIfMissing())
	}
	if c.network() == NetworkNone {
		cfg.HandledAccessNet = ll.AccessNetBindTCP | ll.AccessNetConnectTCP
		// Abstract unix sockets and signals are the other ways out of
		// a run that may not talk to anything (ABI 6).
		cfg.Scoped = ll.ScopeAbstractUnixSocket | ll.ScopeSignal
	}
	return cfg.BestEffort(), rules, nil
}

// KernelABI returns the Landlock ABI version this kernel offers, 0 when it
// has none (or Landlock is not enabled at boot).
func KernelABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// ApplyProcess restricts every thread of the calling process to c (and
// sets its limits), for good: what it runs afterwards inherits it. abi is
// the kernel's (KernelABI); a kernel c cannot be enforced on fails as
// Check says. The returned warning is for the run's stderr.
func ApplyProcess(c *Confinement, abi int) (string, error) {
	return apply(c, abi, func(cfg landlock.Config, rules []landlock.Rule) error {
		return cfg.Restrict(rules...)
	})
}

// ApplyThread restricts the calling thread, which must be locked to its
// goroutine for good and must execve(2) next (the launcher, the bubblewrap
// sandbox's helper): the new program inherits the thread's Landlock domain
// and no_new_privs, while the process's other threads stay unrestricted.
func ApplyThread(c *Confinement, abi int) (string, error) {
	return apply(c, abi, func(cfg landlock.Config, rules []landlock.Rule) error {
		fd, flags, err := cfg.NewRulesetFD(rules...)
		if err != nil || fd < 0 {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
		}
		return ll.LandlockRestrictSelf(fd, flags)
	})
}

func apply(c *Confinement, abi int, restrict func(landlock.Config, []landlock.Rule) error) (string, error) {
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
	cfg, rules, err := c.config(abi)
	if err != nil {
		return "", err
	}
	if err := restrict(cfg, rules); err != nil {
		return "", fmt.Errorf("confine: apply landlock: %w", err)
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
