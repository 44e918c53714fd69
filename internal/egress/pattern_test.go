package egress

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParsePattern(t *testing.T) {
	good := map[string]string{
		"github.com:443":             "github.com:443",
		"GitHub.COM.":                "github.com",
		"*.example.com":              "*.example.com",
		"api.example.org:443":        "api.example.org:443",
		"git.corp.example/private":   "git.corp.example/private",
		"10.0.0.5:8080":              "10.0.0.5:8080",
		"[::1]:22":                   "[::1]:22",
		"::ffff:10.0.0.1":            "",
		"*.proxy.golang.example:443": "*.proxy.golang.example:443",
	}
	for in, want := range good {
		p, err := ParsePattern(in)
		if want == "" {
			if err == nil {
				t.Errorf("%q: accepted as %v; a bare IPv6 address with colons must be bracketed", in, p)
			}
			continue
		}
		if err != nil || p.String() != want {
			t.Errorf("%q: %v %v, want %q", in, p, err, want)
		}
	}
	for _, bad := range []string{"", "*", "*.com", "github.com:", "github.com:0", "github.com:65536", "github.com:https",
		"git hub.com", "bücher.example", "-a.example", "a..example", "[::1", "[github.com]:443", "http://github.com", "github.com/path", "fe80::1%eth0"} {
		if _, err := ParsePattern(bad); err == nil {
			t.Errorf("%q accepted", bad)
		} else if !strings.Contains(err.Error(), "hint:") {
			t.Errorf("%q: error without a hint: %v", bad, err)
		}
	}
}

func TestMatch(t *testing.T) {
	tg := func(s string) Target {
		x, err := parseTarget(s, 0)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	cases := []struct {
		pat, target string
		want        bool
	}{
		{"github.com:443", "github.com:443", true},
		{"github.com:443", "GITHUB.com.:443", true},
		{"github.com:443", "github.com:22", false},
		{"github.com", "github.com:443", true},
		{"github.com", "github.com:80", true},
		{"github.com", "github.com:8443", false},
		{"*.example.com", "a.example.com:443", true},
		{"*.example.com", "a.b.example.com:443", true},
		{"*.example.com", "example.com:443", false},
		{"*.example.com", "badexample.com:443", false},
		{"github.com:443", "github.com.evil.example:443", false},
		{"10.0.0.5:8080", "10.0.0.5:8080", true},
		{"10.0.0.5:8080", "[::ffff:10.0.0.5]:8080", true},
		{"github.com:443", "140.82.112.3:443", false},
		{"[::1]:22", "[::1]:22", true},
	}
	for _, c := range cases {
		p, err := ParsePattern(c.pat)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Match(tg(c.target)); got != c.want {
			t.Errorf("%s ~ %s = %v, want %v", c.pat, c.target, got, c.want)
		}
	}
}

func TestForbidden(t *testing.T) {
	for a, want := range map[string]string{
		"127.0.0.1": "loopback", "::1": "loopback", "10.1.2.3": "private", "172.16.0.1": "private",
		"192.168.1.1": "private", "fd00::1": "private", "169.254.169.254": "link-local", "fe80::1": "link-local",
		"0.0.0.0": "unspecified", "::": "unspecified", "224.0.0.1": "link-local", "239.1.2.3": "multicast", "100.64.0.1": "shared (CGNAT)",
		"::ffff:127.0.0.1": "loopback", "64:ff9b::a00:1": "private", "0.1.2.3": "this-network",
		"93.184.215.14": "", "2606:4700::1111": "", "140.82.112.3": "",
	} {
		if got := forbidden(netip.MustParseAddr(a)); got != want {
			t.Errorf("%s: %q, want %q", a, got, want)
		}
	}
}
