package shellcmd

import (
	"reflect"
	"testing"

	"github.com/exechost/exechost/internal/fschange"
)

// TestCachesChangeNothing analyses every text of the project's corpora
// with an uncached Analyzer, twice with a cached one (the second time from
// its caches where they hold; the first, for a path an earlier text read,
// from its fact cache) and once with every cache but the fact cache: every
// Analysis must be equal.
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
	for _, text := range texts {
		want := fresh.Analyze(text, fx.env)
		for i := range 2 {
			if got := cached.Analyze(text, fx.env); !reflect.DeepEqual(got, want) {
				t.Fatalf("%q (cached, pass %d):\n got %+v\nwant %+v", text, i+1, got, want)
			}
		}
		if got := noFacts.Analyze(text, fx.env); !reflect.DeepEqual(got, want) {
			t.Fatalf("%q (without the fact cache):\n got %+v\nwant %+v", text, got, want)
		}
	}
	if cached.memo.hits == 0 {
		t.Fatal("the cached Analyzer never used its memo, so this test proves nothing")
	}
	if _, watchable := fschange.WatchStat([]string{fx.root}); watchable && cached.facts.hits == 0 {
		t.Fatal("the cached Analyzer never used its fact cache, so this test proves nothing")
	}
}
