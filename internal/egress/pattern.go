package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/exechost/exechost/internal/hint"
)

// PrivateSuffix, written after a pattern ("git.corp.example:443/private"),
// lets a name resolve to a forbidden address (loopback, private,
// link-local…); without it such a name is refused.
const PrivateSuffix = "/private"

// Pattern is one entry of a run's egress list: a host name, "*." and a
// suffix, or an IP literal, with an optional port.
type Pattern struct {
	// Host is lower case, without a trailing dot; for a wildcard, the
	// suffix after "*." ("example.com" for "*.example.com").
	Host string
	// Wildcard matches names strictly beneath Host at any depth, never
	// Host itself.
	Wildcard bool
	// Port is 0 when the pattern names none: then 80 and 443 match.
	Port int
	// Private lets the name resolve to a forbidden address. An IP literal
	// names its address itself, so it is always private-capable.
	Private bool
	// IP is set when Host is an IP literal.
	IP netip.Addr
}

// String is the pattern as it is written in policy.
func (p Pattern) String() string {
	h := p.Host
	if p.Wildcard {
		h = "*." + h
	}
	if p.IP.Is6() {
		h = "[" + h + "]"
	}
	if p.Port != 0 {
		h += ":" + strconv.Itoa(p.Port)
	}
	if p.Private && !p.IP.IsValid() {
		h += PrivateSuffix
	}
	return h
}

// ParsePattern reads "host[:port][/private]": host is a DNS name (ASCII;
// write internationalised names in their xn-- form), "*." and a name of
// at least two labels, or an IP literal ("[v6]" when a port follows).
func ParsePattern(s string) (Pattern, error) {
	fail := func(why string) (Pattern, error) {
		return Pattern{}, hint.Wrap(fmt.Errorf("egress pattern %q: %s", s, why),
			`write host[:port] such as "github.com:443", "*.example.com" or "10.0.0.5:8080"; add /private to let a name reach a private address`)
	}
	rest := s
	var p Pattern
	if r, ok := strings.CutSuffix(rest, PrivateSuffix); ok {
		rest, p.Private = r, true
	}
	host, port := rest, ""
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return fail("an opening [ without ]")
		}
		host, port = rest[1:end], rest[end+1:]
		if port != "" && !strings.HasPrefix(port, ":") {
			return fail("text after ]")
		}
		port = strings.TrimPrefix(port, ":")
		if port == "" && strings.HasSuffix(rest, ":") {
			return fail("an empty port")
		}
	} else if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		if strings.Count(rest, ":") > 1 {
			return fail("an IPv6 address must be written in [brackets]")
		}
		host, port = rest[:i], rest[i+1:]
		if port == "" {
			return fail("an empty port")
		}
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return fail("the port must be a number from 1 to 65535")
		}
		p.Port = n
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return fail("an address with a zone")
		}
		p.IP, p.Host, p.Private = ip.Unmap(), ip.Unmap().String(), true
		return p, nil
	}
	if strings.HasPrefix(rest, "[") {
		return fail("brackets hold an IPv6 address")
	}
	if w, ok := strings.CutPrefix(host, "*."); ok {
		host, p.Wildcard = w, true
		if !strings.Contains(host, ".") {
			return fail(`"*." needs a name of at least two labels after it (a bare "*" or "*.com" is network "all", not a list)`)
		}
	}
	h, err := normName(host)
	if err != nil {
		return fail(err.Error())
	}
	p.Host = h
	return p, nil
}

// ParsePatterns reads every entry, failing on the first bad one.
func ParsePatterns(list []string) ([]Pattern, error) {
	out := make([]Pattern, 0, len(list))
	for _, s := range list {
		p, err := ParsePattern(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// normName lower-cases a DNS name, drops one trailing dot, and refuses
// anything that is not letters, digits, hyphens and dots in labels of
// 1-63 bytes: what a client asks for is compared as this text.
func normName(h string) (string, error) {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if h == "" {
		return "", errors.New("an empty host")
	}
	if len(h) > 253 {
		return "", errors.New("a name longer than 253 bytes")
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 {
			return "", errors.New("an empty or over-long label")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "", errors.New("a label starting or ending with -")
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("the character %q (write international names as xn--)", c)
			}
		}
	}
	return h, nil
}

// Target is what a client asked to reach, normalised.
type Target struct {
	Host string // lower-case name or canonical IP text
	Port int
	IP   netip.Addr // set when Host is an IP literal
}

func (t Target) String() string {
	h := t.Host
	if t.IP.Is6() {
		h = "[" + h + "]"
	}
	return h + ":" + strconv.Itoa(t.Port)
}

// parseTarget reads a CONNECT authority or a URL host with its port.
func parseTarget(hostport string, defPort int) (Target, error) {
	host, port := hostport, ""
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return Target{}, fmt.Errorf("bad host %q", hostport)
		}
		host, port = hostport[1:end], strings.TrimPrefix(hostport[end+1:], ":")
	} else if i := strings.LastIndexByte(hostport, ':'); i >= 0 {
		host, port = hostport[:i], hostport[i+1:]
	}
	t := Target{Port: defPort}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return Target{}, fmt.Errorf("bad port in %q", hostport)
		}
		t.Port = n
	}
	if t.Port == 0 {
		return Target{}, fmt.Errorf("no port in %q", hostport)
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Zone() == "" {
		t.IP, t.Host = ip.Unmap(), ip.Unmap().String()
		return t, nil
	}
	h, err := normName(host)
	if err != nil {
		return Target{}, fmt.Errorf("bad host %q: %v", host, err)
	}
	t.Host = h
	return t, nil
}

// Match reports whether the pattern admits t. Names match names and IP
// literals match IP literals: a name is never matched by the address it
// resolves to, nor an address by a name.
func (p Pattern) Match(t Target) bool {
	if p.Port == 0 {
		if t.Port != 80 && t.Port != 443 {
			return false
		}
	} else if p.Port != t.Port {
		return false
	}
	if p.IP.IsValid() || t.IP.IsValid() {
		return p.IP.IsValid() && t.IP.IsValid() && p.IP == t.IP
	}
	if p.Wildcard {
		return strings.HasSuffix(t.Host, "."+p.Host)
	}
	return p.Host == t.Host
}

// forbidden reports why an address may not be reached by a name whose
// pattern lacks /private ("" when it may).
func forbidden(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "link-local"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsMulticast():
		return "multicast"
	}
	for _, r := range extraForbidden {
		if r.p.Contains(a) {
			return r.why
		}
	}
	if nat64.Contains(a) {
		b := a.As16()
		return forbidden(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	return ""
}

var nat64 = netip.MustParsePrefix("64:ff9b::/96")

var extraForbidden = []struct {
	p   netip.Prefix
	why string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
}
