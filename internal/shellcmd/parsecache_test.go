package shellcmd

import (
	"reflect"
	"strings"
	"testing"
)

// canonicalSlow is Canonical without canonicalOf's shortcut: the printed
// text is always parsed and printed again.
func canonicalSlow(src string) (string, bool) {
	f0, err := Parse(src)
	if err != nil {
		return "", false
	}
	c, err := Print(f0)
	if err != nil {
		return "", false
	}
	f, err := Parse(c)
	if err != nil {
		return "", false
	}
	c2, err := Print(f)
	return c, err == nil && c2 == c
}

// TestParseCacheGivesTheUncachedAnalysis analyses each text with an empty
// cache and again from the cache: the analyses must be equal, and the
// canonical form the same as the one derived without the shortcut.
func TestParseCacheGivesTheUncachedAnalysis(t *testing.T) {
	fx := newFixture(t)
	texts := append(append([]string{}, differentialCorpus...),
		"echo a\\", "echo  a   b", "cat <<E\nx\nE", "ls # c", "a &&\n b", "echo 'x'\"y\"", "export A=1; ls",
		strings.Repeat("ls; ", maxCachedTextLen/4+1))
	for _, text := range texts {
		z := New(Options{}) // empty caches: the memo would skip the parse
		first := z.Analyze(text, fx.env)
		z.parsed.mu.Lock()
		_, cached := z.parsed.m[text]
		z.parsed.mu.Unlock()
		// Only what passed every text check is cached (an analysis can
		// still fail later, on resolution); failures are recomputed.
		if first.OK && cached != (len(text) <= maxCachedTextLen) || first.Canonical == "" && cached {
			t.Errorf("%q: cached = %v for an analysis with OK %v, canonical %q", text, cached, first.OK, first.Canonical)
		}
		if again := z.Analyze(text, fx.env); !reflect.DeepEqual(first, again) {
			t.Errorf("%q: cached analysis differs:\n first %+v\n again %+v", text, first, again)
		}
		if c, ok := canonicalSlow(text); first.Canonical != "" && (!ok || c != first.Canonical) {
			t.Errorf("%q: canonical %q, without the shortcut %q (stable %v)", text, first.Canonical, c, ok)
		}
	}
}

// FuzzCanonicalShortcut checks that Canonical, which skips the second
// parse when the text is its own canonical form, agrees with the full
// parse-print-parse-print check on every input.
func FuzzCanonicalShortcut(f *testing.F) {
	for _, s := range append(append([]string{}, differentialCorpus...), "echo a\\", "a\n", "cat <<E\nx\nE", "a # b\\") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		_, c, err := Canonical(src)
		want, ok := canonicalSlow(src)
		if (err == nil) != ok || (ok && c != want) {
			t.Fatalf("Canonical(%q) = %q, %v; without the shortcut %q, stable %v", src, c, err, want, ok)
		}
	})
}
