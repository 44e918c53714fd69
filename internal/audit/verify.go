package audit

import "fmt"

// Verify checks every line of the log at path, oldest rotated file first:
// each line must be well formed, its hash must match its content, and its
// prev must be the hash of the line before (across rotated files too). The
// first line of the oldest file may carry any prev, since older files were
// rotated away. It returns how many lines were good before the first bad
// one, and a *LineError naming that line (file:line) wrapping ErrCorrupt or
// ErrTampered.
func Verify(path string) (n int, err error) {
	segs, err := snapshot(path)
	if err != nil {
		return 0, err
	}
	defer closeSegments(segs)
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
			r, err := ParseLine(line)
			if err != nil {
				return fail(err)
			}
			if !first && r.Prev != prev {
				return fail(fmt.Errorf("%w: prev does not match the line before (lines were removed, inserted or reordered)", ErrTampered))
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
