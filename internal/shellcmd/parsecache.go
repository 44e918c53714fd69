package shellcmd

import (
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// Bounds of the cache of parsed request texts.
const (
	// maxCachedTexts: past this many entries the cache starts over.
	maxCachedTexts = 128
	// maxCachedTextLen: longer texts are parsed every time; an agent's
	// repeated commands are short, and a bound keeps the cache's memory
	// (trees included) to a few hundred kilobytes.
	maxCachedTextLen = 1024
)

// parsedText is what the analysis derives from a request's text alone:
// its parse as written and its canonical form with that form's parse.
// Both trees are read-only once cached: the analysis only walks and prints
// them (Parse applies declarations before a tree is shared).
type parsedText struct {
	raw, canon *syntax.File
	canonical  string
}

// parsed caches parsedText by the exact text. Parsing and printing are
// pure functions of the text, so an entry can never be stale; nothing that
// can change (files, PATH, the working directory) enters it. Failures are
// not cached: they are rare and cheap to reproduce.
var parsed = &textCache{m: map[string]*parsedText{}}

type textCache struct {
	mu sync.Mutex
	m  map[string]*parsedText
}

// parseTop parses src and derives its canonical form (canonicalOf),
// through the cache.
func parseTop(src string) (*parsedText, error) {
	if len(src) <= maxCachedTextLen {
		parsed.mu.Lock()
		p := parsed.m[src]
		parsed.mu.Unlock()
		if p != nil {
			return p, nil
		}
	}
	raw, err := Parse(src)
	if err != nil {
		return nil, parseFailure(err)
	}
	canon, c, err := canonicalOf(raw, src)
	if err != nil {
		return nil, failf("%v", err)
	}
	p := &parsedText{raw: raw, canon: canon, canonical: c}
	if len(src) <= maxCachedTextLen {
		parsed.mu.Lock()
		if len(parsed.m) >= maxCachedTexts {
			clear(parsed.m)
		}
		parsed.m[src] = p
		parsed.mu.Unlock()
	}
	return p, nil
}
