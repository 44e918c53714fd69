package bridge

// Denial is what an agent or a person needs to act on a denial: what was
// missing, which policy level decided, and the command that would change
// it. Every field is optional; the execution host fills what it knows and
// the gateway adds the policy's provenance (internal/explain).
type Denial struct {
	// Reason is the design's reason: "security=deny", "allowlist miss",
	// "approval required" or "user denied".
	Reason string `json:"reason,omitempty"`
	// Missing are the executables (absolute paths, or a bare name with
	// "(not found on PATH)") that no allowlist pattern matched.
	Missing []string `json:"missing,omitempty"`
	// Construct is the shell construct that made the command impossible to
	// analyse (command substitution, a redirection to a file, eval, …) and
	// Position where it is in the command text ("line:column"). Only the
	// execution host, which analysed the command, fills them: the gateway
	// relays them and parses nothing.
	Construct string `json:"construct,omitempty"`
	Position  string `json:"position,omitempty"`
	// Policy says where the deciding setting came from.
	Policy *DenialSource `json:"policy,omitempty"`
	// UnknownKeys are keys in the host's exec-approvals.json this version
	// does not know (a typo such as "allowlst" is ignored, so it may be why
	// the command was denied).
	UnknownKeys []string `json:"unknownKeys,omitempty"`
	// Fix is the exact command that would allow it, when one exists.
	Fix string `json:"fix,omitempty"`
	// Hint is what to do, in a sentence.
	Hint string `json:"hint,omitempty"`
}

// DenialSource is the provenance of the setting that decided a denial.
type DenialSource struct {
	// Host is the execution host: "gateway", "this machine", or the node
	// by its display name and a short id ("build-box (3f2a9c01…)"; the
	// id when it has no display name).
	Host string `json:"host"`
	// File is the policy file on that host (exec-approvals.json, or the
	// gateway's exechost.json for a deny requested by the gateway).
	File string `json:"file,omitempty"`
	// Level is where the value came from: "request" (the exec call, the
	// session or the gateway's tools.exec), "agents.<id>", "agents.*",
	// "defaults" or "built-in". The execution host fills it (and File and
	// Setting) from the policy it applied; the gateway names the Host.
	Level string `json:"level"`
	// Setting is the deciding value, e.g. "security=deny".
	Setting string `json:"setting"`
	// Key names the setting that decided: "security", "ask" (a miss under
	// ask=off) or "askFallback" (no approver answered). The execution host
	// fills it from its decision, so nobody parses Setting.
	Key string `json:"key,omitempty"`
}
