package shellcmd

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/fschange"
)

// TestCachesChangeNothing analyses every text of the project's corpora
// with an uncached Analyzer, twice with a cached one (the second time from
// its caches where they hold; the first, for a path an earlier text read,
// from its fact cache) and once with every cache but the fact cache: every
// Analysis must be equal. Then it changes the tree under the caches (a
// tool removed, one no longer executable, one replaced by a symlink to
// bash, a symlink retargeted, one removed, a new program in a directory a
// text cds into) and compares again: a memo or fact cache that kept a
// result without re-checking its facts fails here.
func TestCachesChangeNothing(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	var texts []string
	texts = append(texts, differentialCorpus...)
	texts = append(texts, bypassCorpus...)
	texts = append(texts, attackCorpus...)
	texts = append(texts, generatedCommands(3, 300)...)
	cached, fresh := New(Options{}), New(Options{NoCache: true})
	noFacts := New(Options{NoFactCache: true})
	compare := func(phase string, texts []string) {
		for _, text := range texts {
			want := fresh.Analyze(text, fx.env)
			for i := range 2 {
				if got := cached.Analyze(text, fx.env); !reflect.DeepEqual(got, want) {
					t.Fatalf("%s: %q (cached, pass %d):\n got %+v\nwant %+v", phase, text, i+1, got, want)
				}
			}
			if got := noFacts.Analyze(text, fx.env); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: %q (without the fact cache):\n got %+v\nwant %+v", phase, text, got, want)
			}
		}
	}
	compare("unchanged tree", texts)
	if cached.memo.hits == 0 {
		t.Fatal("the cached Analyzer never used its memo, so this test proves nothing")
	}
	if _, watchable := fschange.New().WatchStat([]string{fx.root}); watchable && cached.facts.hits == 0 {
		t.Fatal("the cached Analyzer never used its fact cache, so this test proves nothing")
	}

	// The texts that read what is about to change, few enough that the
	// memo (maxMemoEntries) keeps them all, analysed twice by new cached
	// Analyzers so each is remembered, and watched where it can be, when
	// the tree changes under it.
	var touched []string
	for _, text := range texts {
		if len(touched) == maxMemoEntries/2 {
			break
		}
		for _, w := range []string{"printf", "timeout", "test", "git", "make", "grep", "pwd"} {
			if strings.Contains(text, w) {
				touched = append(touched, text)
				break
			}
		}
	}
	cached, noFacts = New(Options{}), New(Options{NoFactCache: true})
	before := make(map[string]Analysis, len(touched))
	for _, text := range touched {
		before[text] = fresh.Analyze(text, fx.env)
		for range 2 {
			cached.Analyze(text, fx.env)
			noFacts.Analyze(text, fx.env)
		}
	}
	remembered := 0
	for _, text := range touched {
		if cached.memo.m[keyOf(text, fx.env)] != nil {
			remembered++
		}
	}
	if remembered == 0 {
		t.Fatal("the memo holds none of the texts whose files change, so the second comparison proves nothing")
	}

	// Change the tree the caches vouched for, in each way a lookup sees.
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Remove(filepath.Join(fx.bin, "git")))
	must(os.Chmod(filepath.Join(fx.bin, "make"), 0o644))
	must(os.Remove(filepath.Join(fx.bin, "grep")))
	symlink(t, filepath.Join(fx.bin, "bash"), filepath.Join(fx.bin, "grep"))
	must(os.Remove(filepath.Join(fx.home, "bin", "e")))
	symlink(t, filepath.Join(fx.bin, "bash"), filepath.Join(fx.home, "bin", "e"))
	must(os.Remove(filepath.Join(fx.root, "opt/homebrew/bin/rg")))
	must(os.Chmod(filepath.Join(fx.bin, "printf"), 0o644))
	must(os.Remove(filepath.Join(fx.bin, "timeout")))
	must(os.Remove(filepath.Join(fx.bin, "test")))
	symlink(t, filepath.Join(fx.bin, "bash"), filepath.Join(fx.bin, "test"))
	must(os.Remove(filepath.Join(fx.bin, "pwd")))
	writeExe(t, filepath.Join(fx.work, "sub", "ls"))
	changed := 0
	for _, text := range touched {
		if a := fresh.Analyze(text, fx.env); !reflect.DeepEqual(a, before[text]) {
			changed++
		}
	}
	if changed == 0 {
		t.Fatal("no analysis changed with the tree, so the second comparison proves nothing")
	}
	compare("changed tree", touched)
	t.Logf("%d of %d analyses (%d remembered) changed with the tree", changed, len(touched), remembered)
}
