// Package session keeps the gateway's per-session state in memory: the
// system event queue an agent sees with its next exec response, and the
// exec overrides set by the /exec and /elevated slash commands. Nothing here
// is persisted: overrides are per agent and session and die with the
// gateway, as the spec wants.
package session

import (
	"container/list"
	"fmt"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/policy"
)

// Defaults for a missing agent id or session key.
const (
	DefaultAgent   = "main"
	DefaultSession = "main"
)

// MaxEvents bounds one session's queue: beyond it the oldest events are
// dropped and counted, so a chatty node cannot exhaust the gateway's
// memory.
const MaxEvents = 100

// MaxSessions bounds how many sessions are tracked; the least recently used
// one is forgotten first, in constant time (a gateway at the bound pays it
// for every new session key, under the store's lock).
const MaxSessions = 4096

// Key identifies one agent's session.
type Key struct {
	Agent   string
	Session string
}

// NewKey fills in defaults for empty parts.
func NewKey(agent, session string) Key {
	if agent == "" {
		agent = DefaultAgent
	}
	if session == "" {
		session = DefaultSession
	}
	return Key{Agent: agent, Session: session}
}

// Session is one agent session's state.
type Session struct {
	overrides policy.Settings
	// saved holds the overrides from before /elevated, restored by
	// /elevated off.
	saved    *policy.Settings
	elevated string
	events   []bridge.SystemEvent
	dropped  int
	// once holds the one-time notices already given (Store.Once).
	once map[string]bool
	// lru is the session's place in Store.lru.
	lru *list.Element
}

// Store holds every session. It is safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	sessions map[Key]*Session
	// lru orders the sessions by last use, most recent at the front; each
	// element's value is its Key.
	lru *list.List
	now func() time.Time
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{sessions: make(map[Key]*Session), lru: list.New(), now: time.Now}
}

func (s *Store) get(k Key) *Session {
	ss := s.sessions[k]
	if ss != nil {
		s.lru.MoveToFront(ss.lru)
		return ss
	}
	if len(s.sessions) >= MaxSessions {
		oldest := s.lru.Back()
		delete(s.sessions, s.lru.Remove(oldest).(Key))
	}
	ss = &Session{}
	ss.lru = s.lru.PushFront(k)
	s.sessions[k] = ss
	return ss
}

// Overrides returns the session's exec overrides (a policy layer).
func (s *Store) Overrides(k Key) policy.Settings {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.get(k).overrides
}

// Enqueue adds a system event to the session's queue, dropping the oldest
// when the queue is full; it returns how many were dropped (for metrics).
func (s *Store) Enqueue(k Key, ev bridge.SystemEvent) (dropped int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.get(k)
	if ev.TS == 0 {
		ev.TS = s.now().UnixMilli()
	}
	if len(ss.events) >= MaxEvents {
		n := len(ss.events) - MaxEvents + 1
		ss.events = append(ss.events[:0], ss.events[n:]...)
		ss.dropped += n
		dropped = n
	}
	ss.events = append(ss.events, ev)
	return dropped
}

// Once reports whether notice was not yet given in session k, and records
// it as given: a notice said once per session (which path its sandbox
// commands take), not on every command.
func (s *Store) Once(k Key, notice string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.get(k)
	if ss.once[notice] {
		return false
	}
	if ss.once == nil {
		ss.once = map[string]bool{}
	}
	ss.once[notice] = true
	return true
}

// KindSandbox is the kind of the system event SandboxText words.
const KindSandbox = "exec.sandbox"

// SandboxText is the system event of a session's first sandbox command:
// which backend ran it and how its commands run there.
func SandboxText(backend, runID, path string) string {
	return fmt.Sprintf("Sandbox %s (id=%s): commands: %s", backend, runID, path)
}

// Drain returns and removes the session's queued events. When events were
// dropped, the first one returned is a marker saying how many.
func (s *Store) Drain(k Key) []bridge.SystemEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.get(k)
	var out []bridge.SystemEvent
	if ss.dropped > 0 {
		out = append(out, bridge.SystemEvent{
			Text: fmt.Sprintf("… %d earlier system events dropped (queue limit %d)", ss.dropped, MaxEvents),
			TS:   s.now().UnixMilli(),
			Kind: "dropped",
		})
	}
	out = append(out, ss.events...)
	ss.events, ss.dropped = nil, 0
	return out
}

// Event texts, exactly as the design gives them.

// StartedText is the system event for a run that started.
func StartedText(nodeID, runID string) string {
	return fmt.Sprintf("Exec started (node=%s, id=%s)", nodeID, runID)
}

// FinishedText is the system event for a run that finished, followed by
// the output tail on the next line when there is one.
func FinishedText(nodeID, runID string, code int, tail string) string {
	s := fmt.Sprintf("Exec finished (node=%s, id=%s, code=%d)", nodeID, runID, code)
	if tail != "" {
		s += "\n" + tail
	}
	return s
}

// FailedText is the system event for a run that ended without a result
// because its execution host failed (not a denial: nothing decided
// against the command).
func FailedText(nodeID, runID, reason string) string {
	return fmt.Sprintf("Exec failed (node=%s, id=%s, %s)", nodeID, runID, reason)
}

// DeniedText is the system event for a run the execution host refused.
func DeniedText(nodeID, runID, reason string) string {
	return fmt.Sprintf("Exec denied (node=%s, id=%s, %s)", nodeID, runID, reason)
}
