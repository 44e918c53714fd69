package confine

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// The base layer (see Builder) depends only on the protected set and on
// the directories listed down to it: the rules name the entries that
// listing found, by descriptor. So it stays exact while none of those
// directories has gained, lost or renamed an entry, and a Builder reuses
// it until then. Each change of that kind moves the directory's change
// time (ctime), which no user can set back, and its modification time.
// The Builder keeps each listed directory open, notes both times before
// listing it, and before reusing the layer compares them with the
// directory's times now: any difference builds it again. A directory
// whose change time is within racyMargin of the clock when the walk began
// might change again without its times moving (the file system's
// timestamp granularity): such a layer is used for its run and not kept.

// racyMargin is how recent a listed directory's change time may be for a
// layer to be kept: coarser than the coarsest timestamp granularity of a
// file system Linux mounts (2 s, FAT's).
const racyMargin = 2e9 // ns

// baseLayer is a base layer kept for reuse.
type baseLayer struct {
	key   string // the protected set and handled rights it was built for
	fd    int    // the ruleset
	flags uint32
	seen  []seenDir
}

// seenDir is a directory listed for a base layer, kept open, and its times
// before the listing.
type seenDir struct {
	fd           int
	path         string
	ctime, mtime unix.Timespec
}

// base returns a ruleset of the base layer around protected (with
// handledCfg asked for, handled the kernel's part of it), the caller's to
// close: the kept one while it is still exact, else a new one (kept when
// it can be).
func (b *Builder) base(protected []string, handledCfg, handled landlock.AccessFSSet) (layer, error) {
	key := baseKey(protected, handledCfg)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last != nil && (b.Afresh || b.last.key != key || !b.last.valid()) {
		b.last.close()
		b.last = nil
	}
	if b.last == nil {
		l, keep, err := b.buildBase(protected, handledCfg, handled, !b.Afresh)
		if err != nil {
			return layer{}, err
		}
		if !keep {
			return layer{fd: l.fd, flags: l.flags}, nil
		}
		l.key, b.last = key, l
	}
	// Each run gets its own descriptor of the kept ruleset: a ruleset
	// can be enforced any number of times, and closing one after its
	// run leaves the kept one open.
	fd, err := unix.FcntlInt(uintptr(b.last.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return layer{}, fmt.Errorf("confine: %w", err)
	}
	return layer{fd: fd, flags: b.last.flags}, nil
}

// baseKey says what a base layer is built for: the protected set and the
// handled rights asked for (it fits exactly the confinements with both).
func baseKey(protected []string, handledCfg landlock.AccessFSSet) string {
	return fmt.Sprintf("%x\x00%s", uint64(handledCfg), strings.Join(protected, "\x00"))
}

// baseKey is the key of c's base layer on a kernel of Landlock ABI abi.
func (c *Confinement) baseKey(abi int) string {
	return baseKey(c.Protected, c.config(abi).HandledAccessFS)
}

// buildBase walks the directories down to the protected set and returns
// the base layer; keep says whether it may be reused (record asked for it
// and no listed directory changed too recently).
func (b *Builder) buildBase(protected []string, handledCfg, handled landlock.AccessFSSet, record bool) (*baseLayer, bool, error) {
	b.builds++
	fd, flags, err := landlock.Config{HandledAccessFS: handledCfg}.BestEffort().NewRulesetFD()
	if err != nil {
		return nil, false, err
	}
	l := &baseLayer{fd: fd, flags: flags}
	if fd < 0 {
		// Nothing to restrict on this kernel: an empty ruleset would
		// not do; refuse rather than run unconfined.
		return nil, false, fmt.Errorf("confine: no Landlock ruleset for the protected set")
	}
	w := &walk{b: b, protected: protected, record: record, since: b.now()}
	w.emit = func(p string, pfd int, rights landlock.AccessFSSet) error {
		return addRule(fd, p, pfd, rights&handled)
	}
	err = w.baseGrants()
	l.seen = w.seen
	if err != nil {
		l.close()
		return nil, false, err
	}
	keep := record && !w.racy
	if !keep {
		l.closeSeen()
	}
	return l, keep, nil
}

// keep records the directory open as dfd (at path) for the layer being
// built, with its times now.
func (w *walk) keep(dfd int, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return fmt.Errorf("confine: %s: %w", path, err)
	}
	fd, err := unix.FcntlInt(uintptr(dfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("confine: %s: %w", path, err)
	}
	w.seen = append(w.seen, seenDir{fd: fd, path: path, ctime: st.Ctim, mtime: st.Mtim})
	if st.Ctim.Nano() > w.since.Nano()-racyMargin {
		w.racy = true
	}
	return nil
}

// valid reports whether no directory listed for l has changed since.
func (l *baseLayer) valid() bool {
	var st unix.Stat_t
	for _, d := range l.seen {
		if unix.Fstat(d.fd, &st) != nil || st.Ctim != d.ctime || st.Mtim != d.mtime {
			return false
		}
	}
	return true
}

func (l *baseLayer) closeSeen() {
	for _, d := range l.seen {
		unix.Close(d.fd)
	}
	l.seen = nil
}

func (l *baseLayer) close() {
	l.closeSeen()
	unix.Close(l.fd)
}

// now is the coarse real-time clock (what file times are set from).
func (b *Builder) now() unix.Timespec {
	if b.clock != nil {
		return b.clock()
	}
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts)
	return ts
}

// Close releases the base layer b keeps (its ruleset and the directories
// it watches). b stays usable: the next ruleset builds a new one.
func (b *Builder) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last != nil {
		b.last.close()
		b.last = nil
	}
	return nil
}

// Base returns the base layer of c (the rules around its protected set,
// see base) for a process that applies c itself — the launcher, a warm
// process become the launcher, the interpreter — to be handed as the
// descriptor that the confinement BaseLayer.Hand returns names, so that
// it builds only its own layer. The layer is the caller's to close. Nil
// when there is none to hand: b is nil or Afresh (that process then
// builds both layers itself, as it always could), c protects nothing, or
// abi has no Landlock.
//
// The descriptor shares its ruleset with the one b keeps: a process
// holding it could add rules to every later run's base layer
// (landlock_add_rule). Only this binary's own code holds it, from its
// start or hand-over until it has applied c, and closes it before it
// runs anything of the command (apply); it is close-on-exec from the
// moment it is taken (takeBase), so nothing the command starts inherits
// it.
func (b *Builder) Base(c *Confinement, abi int) (*BaseLayer, error) {
	if b == nil || b.Afresh || abi == 0 || !c.Active() || len(c.Protected) == 0 {
		return nil, nil
	}
	cfg := c.config(abi)
	handled := cfg.HandledAccessFS & fsRightsOf(KernelABI()) // as layers has it
	l, err := b.base(c.Protected, cfg.HandledAccessFS, handled)
	if err != nil {
		return nil, err
	}
	return &BaseLayer{
		file:      os.NewFile(uintptr(l.fd), "landlock-ruleset"),
		protected: c.Protected, key: baseKey(c.Protected, cfg.HandledAccessFS), abi: abi,
	}, nil
}

// takeBase returns the descriptor c.Base when it holds a Landlock
// ruleset and c.BaseFor says it was built for c on this kernel (of ABI
// abi), made close-on-exec for the rest of this process's life (the
// caller closes it once applied), else -1: the base layer is then built
// here, so a missing, closed or wrong descriptor, or one named without
// BaseLayer.Hand, never confines less.
//
// Why a ruleset found there is the run's base layer: the number is only
// ever filled by the runner of the trusted host (runner.BaseFD: by the
// start's inherited files, or by the warm process's dup3 of what the
// runner sent over the private socket it made at the process's start),
// which takes it from its Builder for exactly this confinement and names
// it with BaseLayer.Hand, which refuses a layer built for another (the
// BaseFor checked here catches a caller that named one without it); the
// argv or plan naming it comes from the same runner, and whoever could
// change them could drop the confinement altogether. The one other source of a
// ruleset in this process is this package, which makes none before
// takeBase has run (apply calls it first).
func (c *Confinement) takeBase(abi int) int {
	if c == nil || c.Base <= 2 { // 0-2 are the standard streams, never a ruleset
		return -1
	}
	if !isRuleset(c.Base) {
		return -1
	}
	if c.BaseFor != digest(c.baseKey(abi)) {
		// The rules around another protected set: not used, and not
		// left open for the command to inherit either (it may share
		// a Builder's kept ruleset, see Builder.Base).
		unix.Close(c.Base)
		return -1
	}
	if _, err := unix.FcntlInt(uintptr(c.Base), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		return -1
	}
	return c.Base
}

// isRuleset reports whether fd is a Landlock ruleset open for adding
// rules. Many kinds of file live on the anonymous inode file system
// (fstatfs); of those, only a ruleset gets landlock_add_rule past the
// descriptor to the rule type, so an unknown type is EINVAL for a ruleset
// and EBADFD for any other file (EBADF for no file). Nothing is added.
func isRuleset(fd int) bool {
	var sfs unix.Statfs_t
	if unix.Fstatfs(fd, &sfs) != nil || sfs.Type != unix.ANON_INODE_FS_MAGIC {
		return false
	}
	const unknownRuleType = 0 // the types start at 1
	return errors.Is(ll.LandlockAddRule(fd, unknownRuleType, nil, 0), unix.EINVAL)
}
