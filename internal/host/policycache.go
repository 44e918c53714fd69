package host

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/policy"
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
// the file's size, mtime or inode changes (an atomic rewrite always gives a
// new inode). An edit in place that keeps the size and falls in the same
// timestamp tick as the cached state would keep all three; so a file is
// cached only once its mtime is policyRacyWindow old, after which any write
// sets a different mtime.
type cachedFile struct {
	key    string
	file   *approvals.File
	agents map[string]*agentPolicy
}

// agentPolicy is one agent's resolved policy and compiled allowlist.
type agentPolicy struct {
	resolved approvals.Resolved
	allow    *policy.Allowlist
}

// agentPolicy returns the cached resolution for agent in the current file.
func (e *Engine) agentPolicy(agent string) (*agentPolicy, error) {
	f, err := e.loadApprovals()
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
	r := f.ResolvePolicy(agent)
	ap := &agentPolicy{resolved: r, allow: policy.CompileAllowlist(r.Patterns(), e.Home)}
	// A pattern that matches a path only when case is ignored allows it
	// only if both name the same file (a case-insensitive filesystem), so
	// /x/head never allows a different /x/HEAD.
	ap.allow.SameFile = approvals.SameFile
	if e.cache.file == f {
		if e.cache.agents == nil {
			e.cache.agents = map[string]*agentPolicy{}
		}
		e.cache.agents[agent] = ap
	}
	return ap, nil
}

// policyRacyWindow: exec-approvals.json is cached only when its mtime is at
// least this old. Timestamps come from a coarse clock, so a write within
// the same tick as the cached state could leave the mtime equal; two
// seconds cover every file system's granularity Linux supports. Until then
// each decision reloads the file (only right after an edit).
const policyRacyWindow = 2 * time.Second

func (e *Engine) loadApprovals() (*approvals.File, error) {
	s := e.approvalsStore()
	fi, statErr := os.Stat(s.Path)
	key := ""
	if statErr == nil {
		key = fmt.Sprintf("%d/%d/%v", fi.Size(), fi.ModTime().UnixNano(), fileID(fi))
	} else if !errors.Is(statErr, os.ErrNotExist) {
		return nil, fmt.Errorf("load approvals %s: %w", s.Path, statErr)
	}
	e.mu.Lock()
	if key != "" && e.cache.key == key {
		f := e.cache.file
		e.mu.Unlock()
		return f, nil
	}
	e.mu.Unlock()
	f, err := s.Load()
	if err != nil {
		return nil, err
	}
	if statErr == nil && e.now().Sub(fi.ModTime()) < policyRacyWindow {
		key = "" // too fresh to tell apart from a write in the same tick
	}
	e.mu.Lock()
	e.cache = cachedFile{key: key, file: f}
	e.mu.Unlock()
	return f, nil
}
