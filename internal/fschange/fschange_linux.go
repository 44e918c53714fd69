package fschange

import (
	"cmp"
	"errors"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Events that mean a covered path may resolve differently. A directory
// whose entries a lookup reads gets dirMask: its entries appearing,
// vanishing or being renamed, and attribute changes of it or of anything
// in it. The file or directory a path ends at gets selfMask: its own
// attributes, and it being deleted or moved (a directory's later entries
// do not matter to what its own stat says). One inode watched both ways
// gets both (IN_MASK_ADD).
const (
	selfMask = unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
	dirMask  = selfMask | unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO
)

// maxLinks bounds the symbolic links one path may lead through, as the
// kernel's own lookup does.
const maxLinks = 40

// localFS are the file systems whose every change is made through this
// kernel, so that inotify sees it (statfs f_type).
var localFS = map[int64]bool{
	0xEF53:     true, // ext2, ext3, ext4
	0x58465342: true, // xfs
	0x9123683E: true, // btrfs
	0x01021994: true, // tmpfs
	0x794C7630: true, // overlay
	0xF2F52010: true, // f2fs
}

// watcher is one inotify instance and its view of the mount table.
type watcher struct {
	mu     sync.Mutex
	ifd    int // inotify, non-blocking
	mfd    int // /proc/self/mountinfo
	epoch  uint64
	counts map[int32]uint64 // events seen per watch descriptor
	buf    []byte
}

// Watcher owns one inotify instance and its view of the mount table,
// opened on first use. Its Sets are answered by it alone. There is no
// process-wide Watcher: whoever builds the caches a Watcher vouches for
// (the CLI, for its engines and their analysers; a test) makes one with
// New and passes it down.
type Watcher struct {
	once sync.Once
	w    *watcher // nil where inotify or the mount table cannot be watched
}

// New returns a Watcher of its own: make one per owner, not per use. Its
// descriptors are closed once neither it nor any Set or View of it is
// reachable.
func New() *Watcher { return &Watcher{} }

// get returns x's watcher, or nil where inotify or the mount table cannot
// be watched (limits, seccomp, no /proc).
func (x *Watcher) get() *watcher {
	x.once.Do(func() {
		w := &watcher{counts: map[int32]uint64{}, buf: make([]byte, 64<<10)}
		var err error
		if w.ifd, err = unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC); err != nil {
			return
		}
		if w.mfd, err = unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			unix.Close(w.ifd)
			return
		}
		x.w = w
		// Sets and Views hold w itself, so the descriptors outlive x
		// for as long as anything can still ask them.
		runtime.AddCleanup(w, func(fds [2]int) {
			unix.Close(fds[0])
			unix.Close(fds[1])
		}, [2]int{w.ifd, w.mfd})
	})
	return x.w
}

// Watch covers paths (absolute; each may or may not exist) and returns the
// state of its watches now. It reports false, watching nothing the caller
// may rely on, when a path is relative, leads through too many links, or
// lies on a file system not known to report every change, or when a watch
// cannot be added. A Set is only as good as what the caller read after
// taking it: read the paths after Watch, not before, and trust what was
// read only if it is what the result was computed from.
func (x *Watcher) Watch(paths []string) (Set, bool) { return x.watch(paths, selfMask) }

// WatchContent is Watch for files whose content matters too: a write to a
// covered file (through write(2) or truncate(2); not through a shared
// memory mapping, which queues no event) is also a change.
func (x *Watcher) WatchContent(paths []string) (Set, bool) {
	return x.watch(paths, selfMask|unix.IN_MODIFY|unix.IN_CLOSE_WRITE)
}

// WatchStat is Watch for callers that depend on everything stat(2)
// reports of each path's final file or directory, not only its type,
// permissions and identity: entries created, removed or renamed in a final
// directory (which change its mtime and ctime) and writes into a final
// file (its size and mtime; not through a shared memory mapping, which
// queues no event) are changes too. A stat or lstat result read after
// WatchStat still holds, field for field, while the Set is unchanged.
func (x *Watcher) WatchStat(paths []string) (Set, bool) {
	return x.watch(paths, dirMask|unix.IN_MODIFY)
}

func (x *Watcher) watch(paths []string, finalMask uint32) (Set, bool) {
	w := x.get()
	if w == nil || len(paths) == 0 {
		return Set{}, false
	}
	deps := map[string]uint32{}
	for _, p := range paths {
		if err := dependencies(p, finalMask, deps); err != nil {
			return Set{}, false
		}
	}
	for p := range deps {
		var st unix.Statfs_t
		if unix.Statfs(p, &st) != nil || !localFS[int64(st.Type)] {
			return Set{}, false
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.counts)+len(deps) > MaxWatches {
		if !w.reset() {
			return Set{}, false
		}
	}
	// Parents before children, and each watch's count taken as it is
	// added, with no events read in between: a directory replaced after
	// its parent's watch is in place is an event counted after that count
	// was taken, and one replaced before is the one its own watch, added
	// after, is put on.
	w.poll() // what happened before the watches are taken counts as before
	order := make([]string, 0, len(deps))
	for p := range deps {
		order = append(order, p)
	}
	slices.SortFunc(order, func(a, b string) int {
		return cmp.Or(cmp.Compare(strings.Count(a, "/"), strings.Count(b, "/")), strings.Compare(a, b))
	})
	s := Set{w: w, epoch: w.epoch, wds: make([]int32, 0, len(order)), seen: make([]uint64, 0, len(order))}
	for _, p := range order {
		// Always asked of the kernel, never remembered by path: the
		// inode a path names now is the one to watch, and the kernel
		// answers with the watch it already has on that inode.
		wd, err := unix.InotifyAddWatch(w.ifd, p, deps[p]|unix.IN_MASK_ADD)
		if err != nil {
			return Set{}, false
		}
		if _, ok := w.counts[int32(wd)]; !ok {
			w.counts[int32(wd)] = 0 // counted against MaxWatches
		}
		s.wds = append(s.wds, int32(wd))
		s.seen = append(s.seen, w.counts[int32(wd)])
	}
	return s, true
}

// Unchanged reports whether no watch of s has seen an event, and the mount
// table has not changed, since s was taken. It costs one poll(2), and a
// read of the queued events when there are any.
func Unchanged(s Set) bool {
	if !s.Valid() {
		return false // nothing watched: no inotify instance is needed to say so
	}
	return pollOf(s.w).Unchanged(s) // the watcher that took s answers
}

// A View is what one poll of a Watcher's watches took in: its Unchanged
// answers for any number of Sets without a system call each. A caller that
// checks many Sets for one result (an analysis that reads many paths) polls
// once, after it starts, and checks each Set against that View: each Set
// unchanged then means unchanged at that poll, or a later one.
type View struct{ w *watcher }

// Poll takes in every event queued so far (one poll(2), and a read of the
// queued events when there are any) and returns a View of it. The View
// answers for x's Sets; a Set of another Watcher is changed to it.
func (x *Watcher) Poll() View { return pollOf(x.get()) }

func pollOf(w *watcher) View {
	if w == nil {
		return View{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.poll()
	return View{w}
}

// Unchanged reports whether no watch of s had seen an event, and the mount
// table had not changed, as of the poll that made v (or a later one). The
// zero View reports every Set changed.
func (v View) Unchanged(s Set) bool {
	if !s.Valid() || v.w == nil || s.w != v.w {
		return false
	}
	w := v.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if s.epoch != w.epoch {
		return false
	}
	for i, wd := range s.wds {
		if w.counts[wd] != s.seen[i] {
			return false
		}
	}
	return true
}

// dependencies adds to deps what a lookup of p reads, as the kernel's
// lookup does it: every directory whose entries it searches (dirMask),
// following symbolic links wherever they lead, and the file or directory
// p ends at (selfMask), if it exists. A lookup that stops early (a missing
// or non-directory component) depends on the directory it stopped in,
// where the missing name would appear.
func dependencies(p string, finalMask uint32, deps map[string]uint32) error {
	if !strings.HasPrefix(p, "/") {
		return errors.New("relative path")
	}
	dir, rest, links := "/", p, 0
	for {
		var comp string
		comp, rest = nextComponent(rest)
		if comp == "" {
			deps[dir] |= finalMask
			return nil
		}
		switch comp {
		case ".":
			continue
		case "..":
			// dir is fully resolved, so its lexical parent is its
			// parent; the parent's own watch covers dir being moved.
			deps[dir] |= selfMask
			dir = path.Dir(dir)
			continue
		}
		deps[dir] |= dirMask
		next := path.Join(dir, comp)
		fi, err := os.Lstat(next)
		if err != nil {
			return nil // missing (or unreadable): its appearance changes dir
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			if links++; links > maxLinks {
				return errors.New("too many links")
			}
			target, err := os.Readlink(next)
			if err != nil {
				return err
			}
			if strings.HasPrefix(target, "/") {
				dir = "/"
			}
			rest = target + "/" + rest
			continue
		}
		if !fi.IsDir() {
			if strings.Trim(rest, "/") != "" {
				return nil // not a directory: the lookup fails here
			}
			deps[next] |= finalMask
			return nil
		}
		dir = next
	}
}

// nextComponent splits the first component off a slash-separated path.
func nextComponent(p string) (comp, rest string) {
	p = strings.TrimLeft(p, "/")
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i], p[i:]
	}
	return p, ""
}

// poll takes in whatever is queued: a mount table change or an overflow
// ends the epoch, other events count against their watch. The caller
// holds w.mu.
func (w *watcher) poll() {
	fds := []unix.PollFd{{Fd: int32(w.ifd), Events: unix.POLLIN}, {Fd: int32(w.mfd), Events: unix.POLLPRI}}
	for {
		_, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			w.epoch++ // cannot tell: count it as a change
			return
		}
		break
	}
	if fds[1].Revents != 0 {
		w.epoch++ // the mount table changed (or /proc went away)
	}
	if fds[0].Revents != 0 {
		w.drain()
	}
}

// drain reads every queued event.
func (w *watcher) drain() {
	const header = unix.SizeofInotifyEvent
	for {
		n, err := unix.Read(w.ifd, w.buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			if err != unix.EAGAIN {
				w.epoch++
			}
			return
		}
		for off := 0; off+header <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&w.buf[off]))
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				w.epoch++
			} else {
				w.counts[ev.Wd]++
			}
			off += header + int(ev.Len)
		}
	}
}

// reset drops every watch: a new inotify instance, and a new epoch so that
// no earlier Set matches. The caller holds w.mu.
func (w *watcher) reset() bool {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return false
	}
	unix.Close(w.ifd)
	w.ifd = fd
	w.counts = map[int32]uint64{}
	w.epoch++
	return true
}
