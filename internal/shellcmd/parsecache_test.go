package shellcmd

import (
	"reflect"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
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
	for _, s := range append(append([]string{}, differentialCorpus...), "echo a\\", "a\n", "cat <<E\nx\nE", "a # b\\",
		// newlineShortcut's edges: a text that is canonical but for its
		// final newline, and the texts it leaves to the long way.
		"echo a", "ls;", "echo $", "a #c\\", "echo 'a", "a &&", "cat <<E\nx\nE\n", "f() { a; }", "a\\\\") {
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

// TestNewlineShortcut checks which texts are parsed once (newlineShortcut
// takes them) and that the tree it returns is the canonical text's own
// parse, as Canonical derives it the long way.
func TestNewlineShortcut(t *testing.T) {
	for src, once := range map[string]bool{
		"cd /tmp && git status | grep -v x | sort | uniq -c": true,
		"echo a":        true,
		"a #c\\":        false, // a final backslash, even in a comment
		"echo a\n":      false, // already its own canonical form
		"echo  a":       false, // not canonical
		"ls;":           false,
		"echo a\\":      false, // a final backslash: the newline would join lines
		"cat <<E\nx\nE": false, // here-documents take the long way
		"echo 'a":       false,
		"":              false,
	} {
		f, c := newlineShortcut(src)
		if (f != nil) != once {
			t.Errorf("newlineShortcut(%q) took it: %v, want %v", src, f != nil, once)
			continue
		}
		if f == nil {
			continue
		}
		want, ok := canonicalSlow(src)
		if !ok || c != want || c != src+"\n" {
			t.Errorf("newlineShortcut(%q) = %q; the long way %q (stable %v)", src, c, want, ok)
		}
		if p, err := Print(f); err != nil || p != c {
			t.Errorf("newlineShortcut(%q): tree prints %q, %v; want %q", src, p, err, c)
		}
	}
}

// FuzzMayDeclare checks that a text mayDeclare rules out has no command
// declarations would turn into a declaration clause: skipping its walk
// changes no tree.
func FuzzMayDeclare(f *testing.F) {
	for _, s := range append(append([]string{}, differentialCorpus...), "export a=b", "readonly x", "exp\\\nort a=b",
		"read\\\nonly a", "ex\\port a", "'export' a", "x=1 export a", "a; export b | c", "e\\\r\nxport a") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if mayDeclare(src) {
			return
		}
		p := parsers.Get().(*syntax.Parser)
		file, err := p.Parse(strings.NewReader(src), "")
		parsers.Put(p)
		if err != nil {
			return
		}
		before, err := Print(file)
		if err != nil {
			return
		}
		declarations(file)
		syntax.Walk(file, func(n syntax.Node) bool {
			if _, ok := n.(*syntax.DeclClause); ok {
				t.Fatalf("%q: mayDeclare is false, but declarations made a declaration clause", src)
			}
			return true
		})
		if after, _ := Print(file); after != before {
			t.Fatalf("%q: mayDeclare is false, but declarations changed the tree: %q → %q", src, before, after)
		}
	})
}
