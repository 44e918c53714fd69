package shellcmd

import (
	"reflect"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// canonicalSlow is Canonical without canonicalize's shortcuts: the text
// as given is parsed, and the printed text is always parsed and printed
// again.
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
		// canonicalize's edges: a text that is canonical but for its
		// final newline, one that is not, and the texts it parses as given.
		"echo a", "echo  a", "ls;", "0\\\x00", "a\\\r", "a\r", "a\x00\\", "echo $", "a #c\\", "echo 'a", "a &&", "cat <<E\nx\nE\n", "f() { a; }", "a\\\\") {
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

// TestCanonicalizeParses checks how many parses canonicalize makes (one
// for a text that is its canonical form but for a final newline, two for
// any other that parses) and that its trees are the canonical text's own
// parse, as Canonical derives it the long way.
func TestCanonicalizeParses(t *testing.T) {
	for src, parses := range map[string]int{
		"cd /tmp && git status | grep -v x | sort | uniq -c": 1,
		"echo a":          1,
		"echo a\n":        1, // already its own canonical form
		"a #c\\":          2, // a final backslash, even in a comment: parsed as given
		"echo  a":         2, // not canonical: the text, then its canonical form
		"echo  a\n":       2,
		"ls;":             2,
		"echo a\\":        2, // a final backslash: the newline would join lines
		"cat <<E\nx\nE":   2, // here-documents are parsed as given
		"cat <<E\nx\nE\n": 1,
		"echo 'a":         2, // a parse error: reported for the text as given
		"":                2, // prints as "\n"
	} {
		fm, err := canonicalize(src)
		if fm.parses != parses {
			t.Errorf("canonicalize(%q) parsed %d times, want %d", src, fm.parses, parses)
		}
		want, ok := canonicalSlow(src)
		if (err == nil) != ok {
			t.Errorf("canonicalize(%q): error %v; the long way stable %v", src, err, ok)
			continue
		}
		if err != nil {
			continue
		}
		if fm.c != want {
			t.Errorf("canonicalize(%q) = %q; the long way %q", src, fm.c, want)
		}
		if p, err := Print(fm.canon); err != nil || p != fm.c {
			t.Errorf("canonicalize(%q): canonical tree prints %q, %v; want %q", src, p, err, fm.c)
		}
		if p, err := Print(fm.raw); err != nil || p != fm.c {
			t.Errorf("canonicalize(%q): tree of %q prints %q, %v; want %q", src, fm.written, p, err, fm.c)
		}
		if fm.written != src && fm.written != src+"\n" {
			t.Errorf("canonicalize(%q) parsed %q as the text written", src, fm.written)
		}
	}
}

// agentTexts are commands as agents send them: no final newline, plain
// spacing or not, pipelines, here-documents.
var agentTexts = []string{
	"cd src && git status | head",
	"ls -la",
	"grep -rn foo . | head -20",
	"git diff --stat HEAD~1",
	"find . -name '*.go' -type f | wc -l",
	"cat > notes.txt <<'EOF'\nline one\nline two\nEOF",
	"cd /tmp && ls  -la",
	"echo \"done\"; date",
	"git log --oneline -n 5",
	"sed -n '1,40p' main.go",
	"python3 -c 'print(1)'",
	"cd repo;git status",
}

// BenchmarkCanonicalAgentTexts derives the canonical form of each of
// agentTexts (one op is the whole dozen) and reports the parses it took.
func BenchmarkCanonicalAgentTexts(b *testing.B) {
	parses := 0
	for b.Loop() {
		for _, src := range agentTexts {
			fm, err := canonicalize(src)
			if err != nil {
				b.Fatalf("%q: %v", src, err)
			}
			parses += fm.parses
		}
	}
	b.ReportMetric(float64(parses)/float64(b.N), "parses/op")
	b.ReportAllocs()
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
