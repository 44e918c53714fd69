package shellcmd

import (
	"reflect"
	"testing"
)

// TestCachesChangeNothing analyses every text of the project's corpora
// with an uncached Analyzer and twice with a cached one (the second time
// from its caches where they hold): every Analysis must be equal.
func TestCachesChangeNothing(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	var texts []string
	texts = append(texts, differentialCorpus...)
	texts = append(texts, bypassCorpus...)
	texts = append(texts, attackCorpus...)
	texts = append(texts, generatedCommands(3, 300)...)
	cached, fresh := New(Options{}), New(Options{NoCache: true})
	for _, text := range texts {
		want := fresh.Analyze(text, fx.env)
		for i := range 2 {
			if got := cached.Analyze(text, fx.env); !reflect.DeepEqual(got, want) {
				t.Fatalf("%q (cached, pass %d):\n got %+v\nwant %+v", text, i+1, got, want)
			}
		}
	}
	if cached.memo.hits == 0 {
		t.Fatal("the cached Analyzer never used its memo, so this test proves nothing")
	}
}
