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
		got := CompileAllowlist(patterns, "/home/ada").Match(path)
		want := FirstMatch(patterns, path, "/home/ada")
		if got != want {
			t.Fatalf("compiled Match(%q) over %q = %q, reference %q", path, patterns, got, want)
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
