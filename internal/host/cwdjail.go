package host

import (
	"strconv"
	"strings"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/confine"
)

// cwdJail is the jail of a run in cwd confined as asked says (nil: the
// default jail), resolved, without its temporary directory and its
// protected set (jail adds the state directory). Working it out resolves
// the cwd and every writable root and socket, and looks for the
// repository holding the cwd and reads its git files: a few dozen system
// calls, about 80 µs of a node's run before the command starts (issue
// 39). So the engine keeps it per cwd, confine member and home part
// (Engine.cwdJails) for as long as package fschange vouches that nothing
// it read has changed: an entry made, removed or renamed in a directory a
// lookup read (a .git appearing above the cwd, a link swapped in), a git
// file it read written (core.hooksPath set), a mount. The home's part is
// kept on its own watches (homeReachOf); a new one is a new key.
func (e *Engine) cwdJail(cwd string, asked *approvals.ResolvedConfine) confine.Confinement {
	home := e.homeReachOf(asked)
	work := func(rec *lookups) confine.Confinement { return e.jailFrom(rec, cwd, asked, home) }
	if e.NoCache {
		return work(nil)
	}
	return e.cwdJails.get(cwdJailKey(cwd, asked, home), e.watcher(), work)
}

// cwdJailKey names everything jailFrom works from besides what it reads:
// the cwd, the home's part and the confine member's words it uses. Paths
// hold no NUL, and the words are separated by bytes no path or word holds.
func cwdJailKey(cwd string, asked *approvals.ResolvedConfine, home *homeReach) string {
	var b strings.Builder
	b.WriteString(cwd)
	b.WriteByte(0)
	b.WriteString(strconv.FormatUint(home.gen, 10))
	if asked != nil {
		for _, words := range [][]string{asked.Writable, asked.Sockets, asked.WritablePersistence, {string(asked.Network), string(asked.Unsupported)}} {
			b.WriteByte(0)
			b.WriteString(strings.Join(words, "\x01"))
		}
	}
	return b.String()
}
