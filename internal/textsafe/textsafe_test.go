package textsafe

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"ls -la /tmp", "ls -la /tmp"},
		{"héllo wörld 日本", "héllo wörld 日本"},
		{"echo \x1b[2Jgotcha", `echo \x1b[2Jgotcha`},
		{"a\nb\rc\td", `a\nb\rc\td`},
		{"\x7f\u0085", `\x7f\u0085`},
		{"rm\u202e -rf", `rm\u202e -rf`},
		{"x\u202dy\u202az", `x\u202dy\u202az`},
		{"\u2066a\u2067b\u2068c\u2069", `\u2066a\u2067b\u2068c\u2069`},
		{"zero\u200bwidth\u200c\u200d\u200e\u200f", `zero\u200bwidth\u200c\u200d\u200e\u200f`},
		{"\ufeffbom", `\ufeffbom`},
		{"line\u2028sep\u2029", `line\u2028sep\u2029`},
		{"tag\U000e0041", `tag\U000e0041`},
		{"bad\xff\xfeutf8", `bad\xff\xfeutf8`},
		{"real \ufffd stays", "real \ufffd stays"},
	}
	for _, tt := range tests {
		if got := Text(tt.in); got != tt.want {
			t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestBounded(t *testing.T) {
	long := strings.Repeat("a", 100)
	got := Bounded(long, 40)
	if n := utf8.RuneCountInString(got); n > 40 {
		t.Fatalf("Bounded gave %d runes: %q", n, got)
	}
	if !strings.HasSuffix(got, "bytes)") || !strings.HasPrefix(got, "aaaa") {
		t.Fatalf("Bounded(%q) = %q: want a prefix and a truncation mark", long, got)
	}
	// An escape is never split by the cut.
	esc := strings.Repeat("\u202e", 50)
	got = Bounded(esc, 40)
	if i := strings.LastIndex(got, `\u`); i >= 0 && !strings.HasPrefix(got[i:], `\u202e`) {
		t.Fatalf("Bounded split an escape: %q", got)
	}
	if Bounded("short", 40) != "short" {
		t.Fatal("Bounded changed a short line")
	}
}

func TestStrip(t *testing.T) {
	if got := Strip(" build\u202e-box\x1b \u2066", 64); got != "build-box" {
		t.Fatalf("Strip = %q", got)
	}
	if got := Strip(strings.Repeat("é", 100), 64); utf8.RuneCountInString(got) != 64 {
		t.Fatalf("Strip kept %d runes", utf8.RuneCountInString(got))
	}
}

// checkSafe fails when out holds a rune a terminal or a bidi algorithm
// would act on.
func checkSafe(t *testing.T, in, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("output of %q is not valid UTF-8: %q", in, out)
	}
	for _, r := range out {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r) || Unsafe(r) {
			t.Fatalf("output of %q kept %U: %q", in, r, out)
		}
	}
}

func FuzzText(f *testing.F) {
	for _, s := range []string{"echo hi", "\x1b]0;title\x07", "\xff\xfe", "a\u202eb\u2066c\u200b", "\U000e0001x", strings.Repeat("\u2069", 300)} {
		f.Add(s, 64)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		checkSafe(t, s, Text(s))
		out := Bounded(s, max)
		checkSafe(t, s, out)
		limit := max
		if limit < 32 {
			limit = 32
		}
		if n := utf8.RuneCountInString(out); n > limit {
			t.Fatalf("Bounded(%q, %d) has %d runes", s, max, n)
		}
		if l := Line(s); utf8.RuneCountInString(l) > MaxLine {
			t.Fatalf("Line(%q) is over MaxLine", s)
		}
		checkSafe(t, s, Strip(s, max))
		if !Needs(s) && Text(s) != s {
			t.Fatalf("Text changed plain %q", s)
		}
	})
}
