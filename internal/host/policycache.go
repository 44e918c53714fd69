package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/explain"
	"github.com/exechost/exechost/internal/fschange"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/shellcmd"
)

func (e *Engine) approvalsStore() *approvals.Store {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.store == nil {
		e.store = approvals.NewStore(e.StateDir)
		if e.Home != "" {
			e.store.Home = e.Home
		}
	}
	return e.store
}

// cachedFile avoids re-parsing exec-approvals.json, re-resolving an agent
// and recompiling its allowlist on every exec: all three are redone whenever
// the file's content changes. The common check is a stat: size, mtime and
// inode equal to the cached state (an atomic rewrite always gives a new
// inode). An edit in place that keeps the size and falls in the same
// timestamp tick as the cached state would keep all three, so the stat key
// is trusted only once the file's mtime is policyRacyWindow old; until then
// (and whenever the key differs) the file is read again and its bytes
// compared with the cached ones, which is exact. That matters because the
// engine itself rewrites the file every UsageFlushDelay under a steady
// load (lastUsedAt stamps), so a busy host's file is always fresh: a
// reparse per decision would cost milliseconds for a large allowlist.
//
// Where package fschange can watch the file and its directories (a local
// file system), a Set taken before the stat and read that produced the
// cached state vouches for it instead, exactly, until anything changes:
// the common check is then one poll(2), not a stat, and a file the
// engine just rewrote is read again once, not on every decision for the
// racy window.
type cachedFile struct {
	key     statKey // zero while the file is too fresh to trust it
	raw     []byte  // the bytes file was parsed from (nil: Default, no file)
	file    *approvals.File
	agents  map[string]*agentPolicy
	watched fschange.Set // vouches for file while unchanged
	// unwatchable counts down loads before watching is tried again, once
	// the file could not be watched (a network file system): without it
	// every decision would pay a refused Watch on top of the stat.
	unwatchable int
}

// rewatchUnwatchable is how many loads skip watching after a file could
// not be watched.
const rewatchUnwatchable = 1024

// agentPolicy is one agent's resolved policy and compiled allowlist.
type agentPolicy struct {
	resolved approvals.Resolved
	allow    *policy.Allowlist
	// rules are the allowlist's argument rules (approvals/argrules.go).
	rules *policy.ArgRules
	// grants are the allowlist's grants (approvals/grants.go), held
	// against the clock, the cwd and the session at every decision.
	grants []approvals.Grant
	// recorded maps each pattern to the sha256 digests its allowlist
	// entries recorded (allow-always), in file order; patterns without one
	// are absent, so a decision looks up its matched patterns only.
	recorded map[string][]string
	// unknownKeys are the file's keys this version ignores, which a
	// denial lists (a typo may be why).
	unknownKeys []string
}

// recordedDigests indexes r's recorded sha256 digests by pattern.
func recordedDigests(r approvals.Resolved) map[string][]string {
	var out map[string][]string
	for _, re := range r.Allowlist {
		if re.Entry.SHA256 == "" {
			continue
		}
		if out == nil {
			out = map[string][]string{}
		}
		out[re.Entry.Pattern] = append(out[re.Entry.Pattern], re.Entry.SHA256)
	}
	return out
}

// agentPolicy returns the cached resolution for agent in the current file.
func (e *Engine) agentPolicy(agent string, view fschange.View) (*agentPolicy, error) {
	f, err := e.loadApprovalsAt(view)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cache.file == f && e.cache.agents != nil {
		if ap, ok := e.cache.agents[agent]; ok {
			return ap, nil
		}
	}
	// Resolution is pure; ResolvePolicy skips the filesystem lint that
	// `approvals get` shows, which has no say in the decision.
	r := f.ResolvePolicyHome(agent, e.Home)
	ap := &agentPolicy{resolved: r, allow: policy.CompileAllowlist(r.Patterns(), e.Home), recorded: recordedDigests(r), unknownKeys: explain.UnknownKeys(f)}
	// A pattern that matches a path only when case is ignored allows it
	// only if both name the same file (a case-insensitive filesystem), so
	// /x/head never allows a different /x/HEAD.
	ap.allow.SameFile = approvals.SameFile
	ap.rules = policy.CompileArgRules(r.ArgRules(), e.Home)
	ap.grants = r.Grants()
	if e.cache.file == f && !e.NoCache {
		if e.cache.agents == nil {
			e.cache.agents = map[string]*agentPolicy{}
		}
		e.cache.agents[agent] = ap
	}
	return ap, nil
}

// statKey is what a stat of exec-approvals.json must still show for the
// cached parse to hold (set: a key was taken and is trusted).
type statKey struct {
	size, mtime int64
	id          any // fileID: the inode where there is one
	set         bool
}

// policyRacyWindow: exec-approvals.json's stat key is trusted only when
// its mtime is at least this old. Timestamps come from a coarse clock, so a
// write within the same tick as the cached state could leave the mtime
// equal; two seconds cover every file system's granularity Linux supports.
// Until then each decision reads the file and compares its bytes.
const policyRacyWindow = 2 * time.Second

func (e *Engine) loadApprovals() (*approvals.File, error) {
	return e.loadApprovalsAt(e.watcher().Poll())
}

// loadApprovalsAt loads exec-approvals.json, trusting the cached parse
// while its watch was unchanged at view (polled after the decision it
// serves began).
func (e *Engine) loadApprovalsAt(view fschange.View) (*approvals.File, error) {
	s := e.approvalsStore()
	e.mu.Lock()
	current, watched, unwatchable := e.cache.file, e.cache.watched, e.cache.unwatchable
	e.mu.Unlock()
	if e.NoCache {
		return e.readApprovals(s)
	}
	if current != nil && view.Unchanged(watched) {
		return current, nil
	}
	// Taken before the stat and the read below, so that it vouches only
	// for what they see.
	var set fschange.Set
	if unwatchable > 0 {
		unwatchable-- // stored back with whatever this load keeps
	} else if ws, ok := e.watchApprovals([]string{s.Path}); ok {
		set = ws
	} else {
		unwatchable = rewatchUnwatchable
	}
	fi, statErr := os.Stat(s.Path)
	var key statKey
	if statErr == nil {
		key = statKey{size: fi.Size(), mtime: fi.ModTime().UnixNano(), id: fileID(fi), set: true}
	} else if !errors.Is(statErr, os.ErrNotExist) {
		return nil, fmt.Errorf("load approvals %s: %w", s.Path, statErr)
	}
	e.mu.Lock()
	cached := e.cache
	e.mu.Unlock()
	if key.set && cached.key == key {
		e.vouch(cached.file, set, unwatchable)
		return cached.file, nil
	}
	if statErr == nil && e.now().Sub(fi.ModTime()) < policyRacyWindow {
		key = statKey{} // too fresh to tell apart from a write in the same tick
	}
	// The stat above was taken before this read, so the key never
	// describes bytes older than the ones cached with it.
	if cached.file != nil && cached.raw != nil && s.Same(cached.raw) {
		e.mu.Lock()
		if e.cache.file == cached.file {
			e.cache.key, e.cache.watched, e.cache.unwatchable = key, set, unwatchable
		}
		e.mu.Unlock()
		return cached.file, nil
	}
	data, err := s.Read()
	missing := errors.Is(err, fs.ErrNotExist)
	if err != nil && !missing {
		return nil, err
	}
	f := approvals.Default()
	if !missing {
		if f, err = approvals.Parse(s.Path, data); err != nil {
			return nil, err
		}
	} else {
		data = nil
	}
	e.mu.Lock()
	e.cache = cachedFile{key: key, raw: data, file: f, watched: set, unwatchable: unwatchable}
	e.mu.Unlock()
	return f, nil
}

// watchApprovals is Engine.WatchApprovals, the engine's Watcher's
// WatchContent unless set.
func (e *Engine) watchApprovals(paths []string) (fschange.Set, bool) {
	if e.WatchApprovals != nil {
		return e.WatchApprovals(paths)
	}
	return e.watcher().WatchContent(paths)
}

// readApprovals reads and parses the file with no cache (NoCache).
func (e *Engine) readApprovals(s *approvals.Store) (*approvals.File, error) {
	data, err := s.Read()
	if errors.Is(err, fs.ErrNotExist) {
		return approvals.Default(), nil
	}
	if err != nil {
		return nil, err
	}
	return approvals.Parse(s.Path, data)
}

// analyzer returns the engine's Analyzer, built on first use.
func (e *Engine) analyzer() *shellcmd.Analyzer {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.Analyzer == nil {
		e.Analyzer = shellcmd.New(shellcmd.Options{NoCache: e.NoCache, Watcher: e.watcher(), Now: e.Now})
	}
	return e.Analyzer
}

// vouch keeps set (and the countdown before watching is tried again) for
// the cached file, if it is still f.
func (e *Engine) vouch(f *approvals.File, set fschange.Set, unwatchable int) {
	e.mu.Lock()
	if e.cache.file == f {
		e.cache.watched, e.cache.unwatchable = set, unwatchable
	}
	e.mu.Unlock()
}
