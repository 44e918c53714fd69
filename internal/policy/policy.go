// Package policy holds exechost's security model: the modes an execution can
// run under, how requested and host-local settings combine, and the decision
// (allow, ask or deny) for one analysed command. It is pure: no file, network
// or process I/O happens here, so every rule can be table-tested exhaustively
// and a newcomer finds every policy outcome in one place.
package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Host names where a command executes.
type Host string

// The three execution hosts of the spec.
const (
	HostSandbox Host = "sandbox" // a container or namespace sandbox; the boundary is the sandbox itself
	HostGateway Host = "gateway" // the gateway's own machine, guarded by its exec-approvals.json
	HostNode    Host = "node"    // a paired node runner, guarded by the node's exec-approvals.json
)

// Security says what may run at all on gateway and node hosts.
type Security string

// Security modes, from strictest to most permissive.
const (
	SecurityDeny      Security = "deny"      // nothing runs
	SecurityAllowlist Security = "allowlist" // only commands whose every executable matches the allowlist
	SecurityFull      Security = "full"      // everything runs (the /elevated mode)
)

// Ask says when a human is asked before a command runs.
type Ask string

// Ask modes, from least to most asking.
const (
	AskOff    Ask = "off"     // never ask; a miss is denied
	AskOnMiss Ask = "on-miss" // ask when the allowlist is not satisfied
	AskAlways Ask = "always"  // ask before every command
)

// Fallback says what happens when a human should be asked but no approver
// answers (none reachable, it crashed, or the prompt timed out).
type Fallback string

// askFallback modes.
const (
	FallbackDeny      Fallback = "deny"      // deny the command
	FallbackAllowlist Fallback = "allowlist" // run it only if the allowlist is satisfied
	FallbackFull      Fallback = "full"      // run it
)

// Built-in defaults, used when no layer sets a value. They are the safe ones
// the spec locks: nothing crosses hosts unless enabled.
const (
	DefaultHost     = HostSandbox
	DefaultSecurity = SecurityDeny
	DefaultAsk      = AskOnMiss
	DefaultFallback = FallbackDeny
)

// Accepted values, in the order users should read them in error messages.
// They are unexported so no caller can widen what Parse accepts; the
// exported functions below return copies.
var (
	hosts      = []Host{HostSandbox, HostGateway, HostNode}
	securities = []Security{SecurityDeny, SecurityAllowlist, SecurityFull}
	asks       = []Ask{AskOff, AskOnMiss, AskAlways}
	fallbacks  = []Fallback{FallbackDeny, FallbackAllowlist, FallbackFull}
)

// Hosts returns the accepted hosts, a fresh copy on every call.
func Hosts() []Host { return slices.Clone(hosts) }

// Securities returns the accepted security modes, a fresh copy.
func Securities() []Security { return slices.Clone(securities) }

// Asks returns the accepted ask modes, a fresh copy.
func Asks() []Ask { return slices.Clone(asks) }

// Fallbacks returns the accepted askFallback modes, a fresh copy.
func Fallbacks() []Fallback { return slices.Clone(fallbacks) }

// ErrInvalidValue is wrapped by every Parse function so callers can tell a
// bad enum value from other failures.
var ErrInvalidValue = errors.New("invalid value")

func parseEnum[T ~string](kind, s string, valid []T) (T, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	for _, ok := range valid {
		if string(ok) == v {
			return ok, nil
		}
	}
	names := make([]string, len(valid))
	for i, ok := range valid {
		names[i] = string(ok)
	}
	return "", fmt.Errorf("%w: %s %q (accepted: %s)", ErrInvalidValue, kind, s, strings.Join(names, ", "))
}

// ParseHost parses a host name (sandbox, gateway, node).
func ParseHost(s string) (Host, error) { return parseEnum("host", s, hosts) }

// ParseSecurity parses a security mode (deny, allowlist, full).
func ParseSecurity(s string) (Security, error) { return parseEnum("security", s, securities) }

// ParseAsk parses an ask mode (off, on-miss, always).
func ParseAsk(s string) (Ask, error) { return parseEnum("ask", s, asks) }

// ParseFallback parses an askFallback mode (deny, allowlist, full).
func ParseFallback(s string) (Fallback, error) { return parseEnum("askFallback", s, fallbacks) }

// Valid reports whether h is one of Hosts.
func (h Host) Valid() bool { _, err := ParseHost(string(h)); return err == nil && string(h) != "" }

// Valid reports whether s is one of Securities.
func (s Security) Valid() bool {
	_, err := ParseSecurity(string(s))
	return err == nil && string(s) != ""
}

// Valid reports whether a is one of Asks.
func (a Ask) Valid() bool { _, err := ParseAsk(string(a)); return err == nil && string(a) != "" }

// Valid reports whether f is one of Fallbacks.
func (f Fallback) Valid() bool {
	_, err := ParseFallback(string(f))
	return err == nil && string(f) != ""
}

func (s Security) rank() int {
	switch s {
	case SecurityFull:
		return 2
	case SecurityAllowlist:
		return 1
	}
	return 0 // deny, and anything unknown, is the strictest
}

func (a Ask) rank() int {
	switch a {
	case AskOff:
		return 0
	case AskOnMiss:
		return 1
	}
	return 2 // always, and anything unknown, is the most asking
}

// Stricter returns the stricter of two security modes. Unknown values count
// as deny, so a corrupted input can never loosen the result.
func Stricter(a, b Security) Security {
	if a.rank() <= b.rank() {
		if !a.Valid() {
			return SecurityDeny
		}
		return a
	}
	if !b.Valid() {
		return SecurityDeny
	}
	return b
}

// MoreAsking returns the more asking of two ask modes. Unknown values count
// as always.
func MoreAsking(a, b Ask) Ask {
	if a.rank() >= b.rank() {
		if !a.Valid() {
			return AskAlways
		}
		return a
	}
	if !b.Valid() {
		return AskAlways
	}
	return b
}
