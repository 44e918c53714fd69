package audit

import "fmt"

// Verify checks every line of the log at path, oldest rotated file first:
// each line must be well formed, its hash must match its content — keyed
// with the log's chain key (<path>.key) — and its prev must be the hash of
// the line before (across rotated files too). Only lines up to the chain
// head recorded when the key was created may carry unkeyed hashes, and a
// log with lines but no key fails: the key is created by the first append.
// The first line of the oldest file may carry any prev, since older files
// were rotated away. It returns how many lines were good before the first
// bad one, and a *LineError naming that line (file:line) wrapping
// ErrCorrupt or ErrTampered.
func Verify(path string) (n int, err error) {
	segs, err := snapshot(path)
	if err != nil {
		return 0, err
	}
	defer closeSegments(segs)
	key, err := loadChainKey(path)
	if err != nil {
		return 0, err
	}
	// unkeyedOK: lines from before the key may still come (until the
	// one whose hash is the key's recorded head).
	unkeyedOK := key == nil || key.Head != ""
	prev, first := "", true
	for _, s := range segs {
		err := scanLines(s.f, s.size, func(line []byte, ln int, partial, tooLong bool) error {
			fail := func(err error) error { return &LineError{File: s.name, Line: ln, Err: err} }
			switch {
			case tooLong:
				return fail(fmt.Errorf("%w: line longer than %d bytes", ErrCorrupt, MaxLine))
			case partial:
				return fail(fmt.Errorf("%w: unterminated line (an append was interrupted or is in progress)", ErrCorrupt))
			}
			r, keyed, err := parseLine(line, key)
			if err != nil {
				return fail(err)
			}
			if !first && r.Prev != prev {
				return fail(fmt.Errorf("%w: prev does not match the line before (lines were removed, inserted or reordered)", ErrTampered))
			}
			switch {
			case key == nil:
				return fail(fmt.Errorf("%w: the log has no chain key %s (it is created by the first append; a log with lines and no key was written before keys or had its key removed)", ErrTampered, KeyPath(path)))
			case !keyed && !unkeyedOK:
				return fail(fmt.Errorf("%w: an unkeyed line after the chain key was created (the line was rewritten without the key)", ErrTampered))
			case !keyed && r.Hash == key.Head:
				unkeyedOK = false // the last line from before the key
			case keyed:
				unkeyedOK = false
			}
			first = false
			prev = r.Hash
			n++
			return nil
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
