package approvals

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/exechost/exechost/internal/policy"
)

// TokenBytes is how many random bytes a generated socket token has.
const TokenBytes = 32

// MaxCommandLen caps lastUsedCommand so one huge command line cannot bloat
// the file every later operation reads.
const MaxCommandLen = 4096

// NewToken returns a fresh socket token: TokenBytes random bytes, base64url
// without padding.
func NewToken() string {
	b := make([]byte, TokenBytes)
	rand.Read(b) // never fails (crypto/rand panics instead)
	return base64.RawURLEncoding.EncodeToString(b)
}

func agentKey(agent string) string {
	if agent == "" {
		return WildcardAgent
	}
	return agent
}

func samePattern(a, b string) bool {
	return strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(b))
}

// AddPattern appends pattern to agent's allowlist ("" means "*"), creating
// the agent if needed. It reports false, changing nothing, when the pattern
// is empty or already listed for that agent (compared case-insensitively,
// as matching is). The new entry gets a random id.
func (f *File) AddPattern(agent, pattern string) (added bool) {
	return f.AddPinned(agent, pattern, "")
}

// AddPinned is AddPattern recording the sha256 of the file the pattern
// was added for (allow-always); an existing entry for the pattern gets the
// digest.
func (f *File) AddPinned(agent, pattern, sha256 string) (added bool) {
	pattern = strings.TrimSpace(pattern)
	if pattern == "" {
		return false
	}
	agent = agentKey(agent)
	if f.Agents == nil {
		f.Agents = map[string]*Agent{}
	}
	a := f.Agents[agent]
	if a == nil {
		a = &Agent{}
		f.Agents[agent] = a
	}
	for i, e := range a.Allowlist {
		if samePattern(e.Pattern, pattern) && !e.IsArgRule() {
			if sha256 != "" {
				a.Allowlist[i].SHA256 = sha256
			}
			return false
		}
	}
	a.Allowlist = append(a.Allowlist, Entry{ID: uuid.NewString(), Pattern: pattern, SHA256: sha256})
	return true
}

// RemovePattern removes the entries of agent's allowlist ("" means "*")
// whose id equals patternOrID or whose pattern equals it case-insensitively.
// It reports whether anything was removed.
func (f *File) RemovePattern(agent, patternOrID string) (removed bool) {
	a := f.Agents[agentKey(agent)]
	if a == nil || strings.TrimSpace(patternOrID) == "" {
		return false
	}
	n := len(a.Allowlist)
	a.Allowlist = slices.DeleteFunc(a.Allowlist, func(e Entry) bool {
		return e.ID == patternOrID || samePattern(e.Pattern, patternOrID)
	})
	if len(a.Allowlist) == 0 {
		a.Allowlist = nil
	}
	return len(a.Allowlist) != n
}

// RecordUse notes that pattern allowed command (whose executable resolved,
// symlinks followed, to resolvedPath) at time at. It updates the entry in
// whichever list holds the pattern, looking where matching looks first: the
// wildcard agent, then agent. It reports false when no entry holds pattern
// (the file changed since the match), which is not an error.
func (f *File) RecordUse(agent, pattern, command, resolvedPath string, at time.Time) (recorded bool) {
	e := f.findEntry(agentKey(agent), pattern)
	if e == nil {
		return false
	}
	e.LastUsedAt = at.UnixMilli()
	e.LastUsedCommand = truncate(command, MaxCommandLen)
	e.LastResolvedPath = resolvedPath
	return true
}

func (f *File) findEntry(agent, pattern string) *Entry {
	order := []string{WildcardAgent}
	if agent != WildcardAgent {
		order = append(order, agent)
	}
	for _, exact := range []bool{true, false} {
		for _, id := range order {
			a := f.Agents[id]
			if a == nil {
				continue
			}
			for i := range a.Allowlist {
				p := a.Allowlist[i].Pattern
				if (exact && p == pattern) || (!exact && samePattern(p, pattern)) {
					return &a.Allowlist[i]
				}
			}
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// SocketPath returns the approval socket's path: socket.path with "~"
// expanded to home and a relative path taken relative to stateDir, or
// DefaultSocketPath(stateDir) when the file names none.
func (f *File) SocketPath(stateDir, home string) string {
	p := strings.TrimSpace(f.Socket.Path)
	if p == "" {
		return DefaultSocketPath(stateDir)
	}
	p = policy.ExpandHome(p, home)
	if !filepath.IsAbs(p) {
		p = filepath.Join(stateDir, p)
	}
	return filepath.Clean(p)
}

// Normalize makes f what every written file is: the current version, a
// socket path and token, every default set (missing ones get the built-in
// value, which is what they meant), valid enum values in canonical
// spelling, and an id on every entry. Invalid enum values are kept as
// written so Resolve keeps reporting them; Unknown members are untouched.
func (f *File) Normalize(stateDir string) {
	f.Version = Version
	f.versionMissing = false
	if strings.TrimSpace(f.Socket.Path) == "" {
		f.Socket.Path = DefaultSocketPath(stateDir)
	}
	if f.Socket.Token == "" {
		f.Socket.Token = NewToken()
	}
	fill := func(s *string, v string) {
		if strings.TrimSpace(*s) == "" {
			*s = v
		}
	}
	fill(&f.Defaults.Security, string(policy.DefaultSecurity))
	fill(&f.Defaults.Ask, string(policy.DefaultAsk))
	fill(&f.Defaults.AskFallback, string(policy.DefaultFallback))
	canonical(&f.Defaults.Security, &f.Defaults.Ask, &f.Defaults.AskFallback)
	if f.Agents == nil {
		f.Agents = map[string]*Agent{}
	}
	for id, a := range f.Agents {
		if a == nil {
			delete(f.Agents, id)
			continue
		}
		canonical(&a.Security, &a.Ask, &a.AskFallback)
		for i := range a.Allowlist {
			if a.Allowlist[i].ID == "" {
				a.Allowlist[i].ID = uuid.NewString()
			}
		}
	}
}

// canonical rewrites valid enum values in their canonical spelling
// (" Allowlist" → "allowlist") and leaves invalid ones alone.
func canonical(security, ask, fallback *string) {
	if v, err := policy.ParseSecurity(*security); err == nil {
		*security = string(v)
	}
	if v, err := policy.ParseAsk(*ask); err == nil {
		*ask = string(v)
	}
	if v, err := policy.ParseFallback(*fallback); err == nil {
		*fallback = string(v)
	}
}

// Clone returns a deep copy of f.
func (f *File) Clone() *File {
	c := *f
	c.Socket.Extra = f.Socket.Extra.clone()
	c.Defaults.Extra = f.Defaults.Extra.clone()
	c.Defaults.Confine = f.Defaults.Confine.clone()
	c.Extra = f.Extra.clone()
	c.warnings = slices.Clone(f.warnings)
	if f.Agents != nil {
		c.Agents = make(map[string]*Agent, len(f.Agents))
		for id, a := range f.Agents {
			if a == nil {
				c.Agents[id] = nil
				continue
			}
			ac := *a
			ac.Extra = a.Extra.clone()
			ac.Confine = a.Confine.clone()
			if a.Allowlist != nil {
				ac.Allowlist = make([]Entry, len(a.Allowlist))
				for i, e := range a.Allowlist {
					e.Extra = e.Extra.clone()
					ac.Allowlist[i] = e
				}
			}
			c.Agents[id] = &ac
		}
	}
	return &c
}

func (e Extra) clone() Extra {
	if e == nil {
		return nil
	}
	out := make(Extra, len(e))
	for i, m := range e {
		out[i] = Member{Key: m.Key, Value: slices.Clone(m.Value)}
	}
	return out
}

// Redacted returns a copy of f without the socket token, for showing the
// file to a remote operator or a UI: the token is the approver's key.
func (f *File) Redacted() *File {
	c := f.Clone()
	c.Socket.Token = ""
	return c
}

// Hash returns the SHA-256 (hex) of the redacted file as Marshal writes it.
// Editors send it back with UpdateIf to detect concurrent changes; it
// ignores formatting and the token, which a remote editor never sees. It
// returns "" only for a File that cannot be marshalled (built by hand with
// bad Extra members).
func (f *File) Hash() string {
	data, err := f.Redacted().Marshal()
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Replace makes f a copy of next, as `approvals set` does, but keeps f's
// socket path and token where next leaves them empty: an edited file that
// was shown redacted (or comes from another host) never carries the token,
// and dropping it would lock the running approver out.
func (f *File) Replace(next *File) {
	sock := f.Socket
	*f = *next.Clone()
	if f.Socket.Path == "" {
		f.Socket.Path = sock.Path
	}
	if f.Socket.Token == "" {
		f.Socket.Token = sock.Token
	}
}
