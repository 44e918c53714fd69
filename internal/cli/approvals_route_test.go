package cli

import "testing"

func TestPrintable(t *testing.T) {
	tests := []struct{ in, want string }{
		{"ls -la /tmp", "ls -la /tmp"},
		{"héllo wörld", "héllo wörld"},
		{"echo \x1b[2Jgotcha", `echo \x1b[2Jgotcha`},
		{"rm\u202e -rf", `rm\u202e -rf`},
		{"a\nb", `a\nb`},
	}
	for _, tt := range tests {
		if got := printable(tt.in); got != tt.want {
			t.Errorf("printable(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzPrintable(f *testing.F) {
	f.Add("echo hi")
	f.Add("\x1b]0;title\x07")
	f.Add("\xff\xfe")
	f.Fuzz(func(t *testing.T, s string) {
		for _, r := range printable(s) {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x1b {
				t.Fatalf("printable(%q) kept control character %U", s, r)
			}
		}
	})
}
