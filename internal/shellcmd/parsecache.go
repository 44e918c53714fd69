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
// its canonical form and that form's parse, both checked by validate. The
// tree is read-only once cached: the analysis only walks and prints it
// (Parse applies declarations before a tree is shared).
type parsedText struct {
	canon     *syntax.File
	canonical string
}

// textCache caches parsedText by the exact text (Analyzer.parsed).
// Parsing, printing and validation are pure functions of the text, so an
// entry can never be stale; nothing that can change (files, PATH, the
// working directory) enters it. Failures are not cached: they are rare and
// cheap to reproduce.
type textCache struct {
	mu sync.Mutex
	m  map[string]*parsedText
}

// parseTop parses the request's own text src, derives its canonical form
// (canonicalize) and validates both, through the cache
// (for positional false, the only way a request's text is analysed). A
// text that parses but fails a check still returns its canonical form with
// the error, as an analysis reports it.
func (z *Analyzer) parseTop(src string, positional, contained bool) (*parsedText, error) {
	parsed := z.parsed
	cacheable := parsed != nil && !positional && len(src) <= maxCachedTextLen
	// Validation depends on the rules: a text the contained rules accept
	// is kept apart from the strict rules' (no text holds a NUL).
	key := src
	if contained {
		key = "\x00contained\x00" + src
	}
	if cacheable {
		parsed.mu.Lock()
		p := parsed.m[key]
		parsed.mu.Unlock()
		if p != nil {
			return p, nil
		}
	}
	fm, err := canonicalize(src)
	if fm.raw == nil {
		return nil, parseFailure(err)
	}
	if err != nil {
		return nil, failureOf(err)
	}
	raw, written, canon, c := fm.raw, fm.written, fm.canon, fm.c
	p := &parsedText{canon: canon, canonical: c}
	if len(c) > maxTextLen {
		return p, failf("canonical command text longer than %d bytes", maxTextLen)
	}
	// The text as written must pass too: its comments and here-documents
	// are where a shell reading it would disagree.
	if err := validate(raw, written, positional, contained); err != nil {
		return p, err
	}
	if canon != raw {
		if err := validate(canon, c, positional, contained); err != nil {
			return p, err
		}
	}
	if cacheable {
		parsed.mu.Lock()
		if len(parsed.m) >= maxCachedTexts {
			clear(parsed.m)
		}
		parsed.m[key] = p
		parsed.mu.Unlock()
	}
	return p, nil
}
