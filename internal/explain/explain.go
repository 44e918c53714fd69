// Package explain turns a policy denial into what an agent or a person can
// act on: which host, file and level decided, and the exact command that
// would change it, beside what the execution host said was missing (an
// executable, or a shell construct and its position). The gateway fills a
// bridge.Denial with it; the CLI and the MCP server render one with Text,
// so every surface says the same. It parses no command text.
//
// It also lists keys of exec-approvals.json this version does not know
// (UnknownKeys): they are kept on rewrite, but a typo such as "allowlst"
// silently does nothing, which is worth saying both in `approvals get` and
// in a denial it may have caused.
package explain

import (
	"fmt"
	"sort"
	"strings"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/policy"
)

// The design's denial reasons (bridge owns them; these names are kept for
// readers of this package).
const (
	ReasonDisabled         = bridge.ReasonDisabled
	ReasonAllowlistMiss    = bridge.ReasonAllowlistMiss
	ReasonApprovalRequired = bridge.ReasonApprovalRequired
	ReasonUserDenied       = bridge.ReasonUserDenied
)

// ReasonOf returns the design's reason for a policy sentinel err wraps
// ("allowlist miss", …), or "" when it wraps none.
func ReasonOf(err error) string { return bridge.DenialReason(err) }

// Host is the execution host a denial came from, as Complete needs it.
type Host struct {
	// Name is "gateway", "this machine" or the node as a person names it
	// (its display name and a short id; the id when it has none); Node is
	// what `--node` should say for it ("" for the gateway or this
	// machine).
	Name, Node string
	// Path is the host's exec-approvals.json and File its contents (nil
	// when it could not be read: the provenance is then left out).
	Path string
	File *approvals.File
	// Agent is the agent whose policy applied ("" means "*").
	Agent string
	// Requested is the security the caller requested (the exec call, the
	// session or the gateway's tools.exec), combined with the file's.
	Requested policy.Security
}

// Complete fills what d lacks from the host's file: the deciding
// setting's provenance, unknown keys, the fix command and a hint. It
// analyses nothing: the construct (and what was missing) is the execution
// host's to send (host.DenialError), so a gateway that explains a denial
// parses no command (internal/archtest pins that explain and the gateway
// do not import shellcmd).
func Complete(d *bridge.Denial, h Host) {
	if d.Policy != nil && d.Policy.Host == "" {
		d.Policy.Host = h.Name // the execution host filled the rest
	}
	if h.File != nil {
		if d.Policy == nil {
			d.Policy = source(d.Reason, h)
		}
		if len(d.UnknownKeys) == 0 {
			d.UnknownKeys = UnknownKeys(h.File)
		}
	}
	if d.Fix == "" {
		d.Fix = fix(d, h)
	}
	if d.Hint == "" {
		d.Hint = hint(d, h)
	}
}

// source says which setting decided reason, and where it came from.
func source(reason string, h Host) *bridge.DenialSource {
	r := h.File.ResolvePolicy(h.Agent)
	eff := policy.Combine(h.Requested, "", r.Local)
	src := &bridge.DenialSource{Host: h.Name, File: h.Path}
	switch reason {
	case ReasonApprovalRequired:
		src.Level, src.Setting = r.Sources["askFallback"], "askFallback="+string(r.Local.Fallback)
	case ReasonAllowlistMiss:
		src.Level, src.Setting = r.Sources["ask"], fmt.Sprintf("security=%s ask=%s", eff.Security, r.Local.Ask)
	default:
		src.Level, src.Setting = r.Sources["security"], "security="+string(eff.Security)
	}
	if eff.Security != r.Local.Security && reason == ReasonDisabled {
		// The file allows more; the caller's request made it stricter.
		src.Level, src.File = "request", ""
	}
	return src
}

// nodeFlag is " --node N" for a node, else "".
func nodeFlag(h Host) string {
	if h.Node == "" {
		return ""
	}
	return " --node " + shellQuote(h.Node)
}

// fix returns the one command that would allow the denied command, when
// there is one: allowlisting the missing executables (never a construct,
// which no pattern can allow).
func fix(d *bridge.Denial, h Host) string {
	switch d.Reason {
	case ReasonAllowlistMiss, ReasonApprovalRequired:
	default:
		return ""
	}
	if d.Construct != "" {
		return ""
	}
	var cmds []string
	for _, m := range d.Missing {
		if !strings.HasPrefix(m, "/") || strings.ContainsRune(m, ' ') {
			return "" // not found on the host: nothing precise to allow
		}
		agent := ""
		if h.Agent != "" && h.Agent != approvals.WildcardAgent {
			agent = " --agent " + shellQuote(h.Agent)
		}
		cmds = append(cmds, "exechost approvals allowlist add"+nodeFlag(h)+agent+" "+shellQuote(m))
	}
	return strings.Join(cmds, " && ")
}

// hint says what to do in a sentence, for the cases a fix command does
// not cover alone.
func hint(d *bridge.Denial, h Host) string {
	where := "the execution host"
	if h.Name != "" {
		where = h.Name
	}
	var s string
	switch {
	case d.Reason == ReasonUserDenied:
		s = "a human denied this command; do not retry it, ask the user how to proceed"
	case d.Construct != "":
		s = "rewrite the command without " + d.Construct + " (no allowlist pattern can allow it), or ask a human to approve it"
	case d.Reason == ReasonDisabled && d.Policy != nil && d.Policy.Level == "request":
		s = "the caller's requested security is deny: set tools.exec.security in the gateway's exechost.json, or `/exec security=allowlist` for the session"
	case d.Reason == ReasonDisabled:
		s = fmt.Sprintf("security is deny on %s: set it to allowlist (`exechost approvals get%s --json` shows the file; `exechost approvals set%s --file F` replaces it)", where, nodeFlag(h), nodeFlag(h))
	case d.Reason == ReasonApprovalRequired:
		s = "no approver answered and askFallback is deny: a human runs `exechost approver` (or `exechost up`) on " + where + ", or allowlists the executables"
	case d.Fix != "":
		s = "allowlist the executables (the fix command), or ask a human to approve the command"
	}
	if len(d.UnknownKeys) > 0 {
		if s != "" {
			s += "; "
		}
		s += "the approvals file has keys this version ignores (" + strings.Join(d.UnknownKeys, ", ") + "): a typo there may be why"
	}
	return s
}

// Text renders d for a person or an agent, one fact per line, without the
// reason itself (the caller prints the message first).
func Text(d *bridge.Denial) string {
	if d == nil {
		return ""
	}
	var b strings.Builder
	if len(d.Missing) > 0 {
		fmt.Fprintf(&b, "missing: %s\n", strings.Join(d.Missing, ", "))
	}
	if d.Construct != "" {
		pos := ""
		if d.Position != "" {
			pos = " at " + d.Position
		}
		fmt.Fprintf(&b, "construct: %s%s\n", d.Construct, pos)
	}
	if p := d.Policy; p != nil {
		file := ""
		if p.File != "" {
			file = ", " + p.File
		}
		fmt.Fprintf(&b, "policy: %s from %s (host %s%s)\n", p.Setting, p.Level, p.Host, file)
	}
	if len(d.UnknownKeys) > 0 {
		fmt.Fprintf(&b, "unknown keys in the approvals file: %s\n", strings.Join(d.UnknownKeys, ", "))
	}
	if d.Fix != "" {
		fmt.Fprintf(&b, "fix: %s\n", d.Fix)
	}
	if d.Hint != "" {
		fmt.Fprintf(&b, "hint: %s\n", d.Hint)
	}
	return b.String()
}

// UnknownKeys lists the keys in f this version does not know, by their
// path in the file ("agents.main.allowlst"), with the known key each is
// probably a typo of. Members named like a comment ("//", "_comment") are
// not reported.
func UnknownKeys(f *approvals.File) []string {
	var out []string
	add := func(where string, e approvals.Extra, known ...string) {
		for _, m := range e {
			if strings.HasPrefix(m.Key, "_") || strings.HasPrefix(m.Key, "//") || m.Key == "$schema" {
				continue
			}
			s := where + m.Key
			if k := closest(m.Key, known); k != "" {
				s += " (did you mean " + k + "?)"
			}
			out = append(out, s)
		}
	}
	add("", f.Extra, "version", "socket", "defaults", "agents")
	add("socket.", f.Socket.Extra, "path", "token")
	add("defaults.", f.Defaults.Extra, "security", "ask", "askFallback")
	ids := make([]string, 0, len(f.Agents))
	for id := range f.Agents {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		a := f.Agents[id]
		if a == nil {
			continue
		}
		add("agents."+id+".", a.Extra, "security", "ask", "askFallback", "allowlist")
		for i, e := range a.Allowlist {
			add(fmt.Sprintf("agents.%s.allowlist[%d].", id, i), e.Extra, "id", "pattern", "lastUsedAt", "lastUsedCommand", "lastResolvedPath")
		}
	}
	return out
}

// closest returns the known key within a small edit distance of key.
func closest(key string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := distance(strings.ToLower(key), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// distance is the Levenshtein distance of a and b (keys are short).
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == '+' || r == ':' || r == '@' || r == '=' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
