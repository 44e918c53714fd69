package policy

import "testing"

// FuzzAllowlistMatch checks that the compiled matcher agrees with the
// reference matcher for arbitrary patterns (user-written file content) and
// paths, and never panics.
func FuzzAllowlistMatch(f *testing.F) {
	f.Add("/usr/bin/*", "/usr/bin/rg", "/usr/local/bin/{a,b}")
	f.Add("~/Projects/**/bin/rg", "/home/ada/Projects/x/bin/rg", "rg")
	f.Add("/srv/[ab]*/run", "/srv/alpha/run", "/**")
	f.Add("/A/B/c?", "/a/b/cd", "[")
	f.Fuzz(func(t *testing.T, p1, path, p2 string) {
		patterns := []string{p1, p2}
		for _, same := range []func(string, string) bool{nil, func(string, string) bool { return true }} {
			a := CompileAllowlist(patterns, "/home/ada")
			a.SameFile = same
			got := a.Match(path)
			want := FirstMatch(patterns, path, "/home/ada", same)
			if got != want {
				t.Fatalf("compiled Match(%q) over %q (SameFile set: %v) = %q, reference %q", path, patterns, same != nil, got, want)
			}
		}
	})
}

// FuzzParseEnums checks that parsing never accepts what Valid rejects.
func FuzzParseEnums(f *testing.F) {
	f.Add("full")
	f.Add(" ON-MISS ")
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := ParseSecurity(s); err == nil && !v.Valid() {
			t.Fatalf("ParseSecurity(%q) = %q, not Valid", s, v)
		}
		if v, err := ParseAsk(s); err == nil && !v.Valid() {
			t.Fatalf("ParseAsk(%q) = %q, not Valid", s, v)
		}
	})
}
