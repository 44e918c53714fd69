// Package approvals is the exec-approvals.json store: an execution host's own
// policy (security, ask, askFallback), its per-agent allowlists and the
// approval socket's credentials.
//
// The file is the spec's schema v1. It is read leniently where leniency
// cannot widen anything (an invalid enum value falls back to the next level
// and is reported) and strictly where a misread could (a file that does not
// parse, a newer version, a wrong type: every operation fails and the file is
// never overwritten). Fields this version does not know survive a rewrite.
// Writes are atomic, 0600 in a 0700 directory, and happen under a file lock
// as lock → re-read → change → write, so concurrent exechost processes never
// lose each other's entries.
package approvals

import (
	"encoding/json"
	"path/filepath"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/state"
)

// Version is the schema version this package reads and writes.
const Version = 1

// WildcardAgent is the agent id whose settings and allowlist apply to every
// agent, under the agent's own.
const WildcardAgent = "*"

// DefaultPath returns where the approvals file lives in stateDir.
func DefaultPath(stateDir string) string {
	return filepath.Join(stateDir, state.ApprovalsFile)
}

// DefaultSocketPath returns the approval socket's path when the file does
// not name one.
func DefaultSocketPath(stateDir string) string {
	return filepath.Join(stateDir, state.ApprovalsSock)
}

// File is a decoded exec-approvals.json. Enum fields hold the text as
// written (possibly invalid) so that `approvals get` can report a typo
// instead of the store silently dropping it; Resolve decides what applies.
type File struct {
	// Version is the schema version; 0 is written as the current version.
	Version  int
	Socket   Socket
	Defaults Defaults
	// Agents maps agent ids (and WildcardAgent) to their settings.
	Agents map[string]*Agent
	// Extra holds top-level members this version does not know.
	Extra Extra

	// versionMissing and warnings record problems found while parsing
	// that do not stop the file from loading (no version, a key that
	// differs from a known one only by case); Resolve reports them.
	versionMissing bool
	warnings       []string
}

// Socket is where the approver listens and the shared secret both sides use
// for the socket's HMACs.
type Socket struct {
	// Path may start with "~/"; empty means DefaultSocketPath.
	Path string
	// Token is the HMAC key. It never crosses the socket or the gateway.
	Token string
	Extra Extra
}

// Defaults is the host-wide policy under every agent.
type Defaults struct {
	Security    string
	Ask         string
	AskFallback string
	// EnvAllowlist names the variables (NAME or PREFIX*) a command may give
	// its programs beyond policy's built-in safe set, for every agent.
	EnvAllowlist []string
	// Confine is the "confine" member (confine.go); nil when absent.
	Confine *Confine
	Extra   Extra
}

// Agent is one agent's settings; empty fields defer to WildcardAgent, then
// Defaults.
type Agent struct {
	Security    string
	Ask         string
	AskFallback string
	Allowlist   []Entry
	// EnvAllowlist adds to the defaults' and the wildcard agent's.
	EnvAllowlist []string
	// Confine is the "confine" member (confine.go); nil when absent.
	Confine *Confine
	Extra   Extra
}

// Entry is one allowlist pattern and what it last allowed, so a human can
// audit why a pattern exists before trusting it further.
//
// Its JSON tags are the file's member names, so an Entry (or a Resolved)
// can be shown with encoding/json; the file itself is written by Marshal.
type Entry struct {
	// ID is stable across edits; the store gives every entry one.
	ID      string `json:"id,omitempty"`
	Pattern string `json:"pattern"`
	// LastUsedAt is in Unix milliseconds; 0 means never.
	LastUsedAt       int64  `json:"lastUsedAt,omitempty"`
	LastUsedCommand  string `json:"lastUsedCommand,omitempty"`
	LastResolvedPath string `json:"lastResolvedPath,omitempty"`
	// SHA256 is the digest of the file an allow-always recorded: a file
	// that later differs at the path is shown as changed in prompts and
	// audit records (the entry still matches by path).
	SHA256 string `json:"sha256,omitempty"`
	// Args, Deny, Examples and CounterExamples make the entry an argument
	// rule (argrules.go, policy.ArgRule); Args nil is a rule on the path
	// alone.
	Args            []string `json:"args,omitempty"`
	Deny            bool     `json:"deny,omitempty"`
	Examples        []string `json:"examples,omitempty"`
	CounterExamples []string `json:"counterExamples,omitempty"`
	// ExpiresAt (Unix milliseconds, 0: never) and Scope make the entry a
	// grant that ends or applies only in part (grants.go).
	ExpiresAt int64  `json:"expiresAt,omitempty"`
	Scope     *Scope `json:"scope,omitempty"`
	Extra     Extra  `json:"-"`
}

// Extra holds members a newer (or other) writer added, in file order, so a
// rewrite keeps them with the same meaning. Values are compact JSON.
type Extra []Member

// Member is one preserved JSON object member.
type Member struct {
	Key   string
	Value json.RawMessage
}

// Default returns the file a host starts from when it has none: version 1,
// the built-in defaults (deny, on-miss, deny) and no agents. The socket path
// and token are filled in when the store first writes it.
func Default() *File {
	return &File{
		Version: Version,
		Defaults: Defaults{
			Security:    string(policy.DefaultSecurity),
			Ask:         string(policy.DefaultAsk),
			AskFallback: string(policy.DefaultFallback),
		},
		Agents: map[string]*Agent{},
	}
}
