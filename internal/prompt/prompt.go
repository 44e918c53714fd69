// Package prompt holds what an execution host asks a human and where the
// question waits for an answer: the request shown in the approver UIs, the
// allow-always plan, the approver's queue (Broker) that every UI lists and
// resolves, the fair share of prompts per agent (Fair) and the sentinel
// errors that mean "no answer from a human". It sits just above the leaves
// (policy, idprefix) because every layer that asks or answers shares it:
// the engine that builds a prompt (host), the approval socket that carries
// it (asksock), the daemons that route it (gateway, node, approvalroute)
// and the UIs that show it (approverui/...).
//
// The JSON field names are the design's ("Approval socket", the request
// object); the raw bytes a client sends are what the socket's HMAC covers.
package prompt

// Request is what a human sees: the "request" object of an approval
// socket request frame. Its raw JSON bytes (as sent) are what the HMAC covers.
type Request struct {
	Command       string   `json:"command"`
	Argv          []string `json:"argv"`
	Cwd           string   `json:"cwd"`
	Host          string   `json:"host"`
	Security      string   `json:"security"`
	Ask           string   `json:"ask"`
	AgentID       string   `json:"agentId"`
	SessionKey    string   `json:"sessionKey"`
	NodeID        string   `json:"nodeId"`
	ResolvedPaths []string `json:"resolvedPaths"`
	// Extensions beyond the design's minimum; approvers that do not know
	// them ignore them.
	Reason      string   `json:"reason,omitempty"`      // why the prompt appeared ("allowlist-miss", "ask=always", …)
	Allowlisted []bool   `json:"allowlisted,omitempty"` // per resolved path: already allowlisted?
	Choices     []string `json:"choices,omitempty"`     // decisions offered (no allow-always with ask=always)
	ExpiresAtMs int64    `json:"expiresAtMs,omitempty"` // when the host stops waiting and applies askFallback
	Fallback    string   `json:"askFallback,omitempty"` // what happens then
	// What will run: the canonical form of the parsed command (printed from
	// the tree the host analysed), its sha256 (which the approval binds: the
	// host runs nothing else on this answer), how it runs ("interpreter",
	// "direct", "interpreter, unchecked" or "shell text") and each
	// executable with how it starts ("exec /usr/bin/git", …).
	Canonical   string   `json:"canonical,omitempty"`
	PlanHash    string   `json:"canonicalSha256,omitempty"`
	RunsAs      string   `json:"runsAs,omitempty"`
	Executables []string `json:"executables,omitempty"`
	// Env is what the command's programs get beyond the execution host's
	// own environment (secret-looking values redacted), and EnvMissing the
	// names of it the host's environment allowlist does not permit.
	Env        map[string]string `json:"env,omitempty"`
	EnvMissing []string          `json:"envMissing,omitempty"`
	// ExecutableSHA256 maps each executable the run may start to the
	// sha256 of the file decided on: only that file starts.
	ExecutableSHA256 map[string]string `json:"executableSha256,omitempty"`
	// Changed lists executables that differ from the file an allow-always
	// recorded for their allowlist entry (its sha256).
	Changed []string `json:"changedSinceAllowAlways,omitempty"`
	// Confinement says what the kernel will let the run touch: where it
	// may write, what it can never read, its network.
	Confinement string `json:"confinement,omitempty"`
	// AllowAlways says exactly what an allow-always answer would add to
	// the allowlist and what it would leave out; nil when the execution
	// host did not say (the UIs then say so rather than guess).
	AllowAlways *AllowAlwaysPlan `json:"allowAlways,omitempty"`
}

// AllowAlwaysPlan is what an allow-always answer would persist: the
// execution host fills it from the same computation that persists
// (shellcmd.Recordable), so what the human reads is what gets written.
type AllowAlwaysPlan struct {
	// Add lists the exact patterns that would be added, in order.
	Add []string `json:"add"`
	// Skipped explains each executable left out (shells, interpreters,
	// privilege changers, unresolved names).
	Skipped []string `json:"skipped,omitempty"`
}
