// Package fschange tells, with one system call, whether anything a set of
// paths resolves through may have changed since a point in time, so that
// a result computed from those paths (an analysis that stat-ed and
// resolved them) can be reused without reading them all again.
//
// A Set covers every directory a lookup of each path reads — each ancestor,
// and every directory a symbolic link on the way leads through — and the
// file or directory each path ends at, with inotify watches. An entry
// created, removed or renamed in one of those directories, or a change to
// the attributes (mode, owner, links) of one of them or of the final file,
// queues an event before the system call that made it returns: Unchanged,
// called after that, sees it. Mounts change what a path resolves to
// without any inotify event; a change to this mount namespace's mount
// table (reported by /proc/self/mountinfo as a poll(2) priority event)
// counts as a change to every Set. An overflowing event queue does too.
//
// Only paths on file systems whose every change goes through this kernel
// are watched (ext2/3/4, xfs, btrfs, tmpfs, overlay, f2fs): on a network
// or FUSE file system another machine's change queues nothing here, so
// Watch refuses such paths and the caller keeps reading them itself. (An
// overlay's lower layers must not change while it is mounted; a change
// made to them from outside would not be seen.) Off Linux Watch always
// refuses.
//
// WatchStat covers a path's final file or directory for everything stat(2)
// reports of it (its entries, for a directory; its writes, for a file),
// for callers that keep the stat result itself. A caller that checks many
// Sets for one result polls once (Poll) and asks the View for each.
//
// The watches belong to a Watcher (New), which its owner keeps and passes
// down: there is no process-wide one that vouches for every cache. A Set
// is answered only by the Watcher that took it.
//
// A Set is an over-approximation: any event on any of its watches, related
// to the caller's result or not, reports a change. It never reports "no
// change" when one of the covered paths changed.
package fschange

// MaxWatches bounds the watches one process holds; past it they are all
// dropped and taken again as needed (every earlier Set then reports a
// change).
const MaxWatches = 4096

// Set is the state of a set of watches at one point: Unchanged(s) reports
// whether any of them has seen an event since. The zero Set is never
// unchanged.
type Set struct {
	w     *watcher // the watcher that took it (nil off Linux)
	epoch uint64
	wds   []int32
	seen  []uint64
}

// Valid reports whether s came from a successful Watch.
func (s Set) Valid() bool { return len(s.wds) > 0 }
