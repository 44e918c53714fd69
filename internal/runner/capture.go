package runner

import (
	"sync"
	"unicode/utf8"
	"unsafe"
)

// Output caps from the spec.
const (
	// MaxOutput is the most combined stdout+stderr bytes a result keeps.
	MaxOutput = 200_000
	// TailSize is how many of the last output bytes an event may carry.
	TailSize = 20_000
	// TruncatedSuffix ends output that was cut.
	TruncatedSuffix = "… (truncated)"
)

// tailMarker prefixes a tail whose earlier output was dropped, so a reader
// of an event never mistakes the tail for the whole output.
const tailMarker = "…"

// Which stream lost bytes first; the truncation marker goes there because
// that is where the reader notices output stopping.
const (
	cutNone = iota
	cutStdout
	cutStderr
)

// Capture collects a process's stdout and stderr under one shared byte cap
// without ever holding more than the cap plus a fixed tail ring in memory,
// however much the process writes: a 10 GB flood costs the same as 200 KB.
// It also keeps the last TailSize bytes of the combined stream for lifecycle
// events. Writes never fail, so a chatty process is never killed by SIGPIPE
// for exceeding the cap. Capture is safe for concurrent use by the stdout and
// stderr copiers. Across the two streams, bytes count against the cap and
// enter the tail in the order the copiers deliver them, which keeps each
// stream's own order but may differ from how the process interleaved its
// writes to the two.
type Capture struct {
	mu  sync.Mutex
	max int // cap on len(stdout)+len(stderr)
	// stdout and stderr are only ever appended to: bytes once written
	// are never changed, which is what lets Result hand them out as
	// strings without a copy.
	stdout []byte // kept stdout, at most max bytes together with stderr
	stderr []byte
	cut    int   // cutNone, cutStdout or cutStderr: which stream lost bytes first
	total  int64 // bytes written in all, kept or not

	// tail is a ring holding the last len(tail) bytes of the combined
	// stream: the byte at stream offset o lives at tail[o%len(tail)], so
	// total alone says where the ring starts and how full it is.
	tail []byte
}

// NewCapture returns a Capture keeping at most maxBytes bytes of combined
// output (MaxOutput when maxBytes <= 0) and a tail of tailBytes bytes
// (TailSize when tailBytes <= 0).
func NewCapture(maxBytes, tailBytes int) *Capture {
	if maxBytes <= 0 {
		maxBytes = MaxOutput
	}
	if tailBytes <= 0 {
		tailBytes = TailSize
	}
	return &Capture{max: maxBytes, tail: make([]byte, tailBytes)}
}

// Stdout returns a writer for the process's standard output.
func (c *Capture) Stdout() *Stream { return &Stream{c: c, id: cutStdout} }

// Stderr returns a writer for the process's standard error.
func (c *Capture) Stderr() *Stream { return &Stream{c: c, id: cutStderr} }

// Stream is one side (stdout or stderr) of a Capture. Its Write never fails
// and never blocks for longer than a bounded memory copy.
type Stream struct {
	c  *Capture
	id int // cutStdout or cutStderr
}

// Write records p, keeping what fits under the shared cap and feeding the
// tail ring. It always reports len(p) written and a nil error, so the
// process writing never sees EPIPE or SIGPIPE because of the cap.
func (s *Stream) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := p
	if room := c.max - len(c.stdout) - len(c.stderr); len(keep) > room {
		keep = keep[:max(room, 0)]
		if c.cut == cutNone {
			c.cut = s.id
		}
	}
	if len(keep) > 0 {
		if s.id == cutStderr {
			c.stderr = append(c.stderr, keep...)
		} else {
			c.stdout = append(c.stdout, keep...)
		}
	}
	c.appendTail(p)
	c.total += int64(len(p))
	return len(p), nil
}

// appendTail copies the part of p that can still be in the tail into the
// ring. It must run before c.total is advanced past p.
func (c *Capture) appendTail(p []byte) {
	n := int64(len(c.tail))
	off := c.total
	if int64(len(p)) > n {
		off += int64(len(p)) - n
		p = p[int64(len(p))-n:]
	}
	pos := int(off % n)
	k := copy(c.tail[pos:], p)
	copy(c.tail, p[k:])
}

// Dropped returns how many bytes of output were written but not kept.
func (c *Capture) Dropped() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total - int64(len(c.stdout)+len(c.stderr))
}

// Result returns the kept stdout and stderr and whether output was
// truncated. Kept output never exceeds the cap; when bytes were dropped, the
// stream that lost bytes first ends with TruncatedSuffix (on a line of its
// own), which is added on top of the cap, and an incomplete UTF-8 sequence
// at the cut is removed so the text stays valid where the process wrote
// valid text.
func (c *Capture) Result() (stdout, stderr string, truncated bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, errb := c.stdout, c.stderr
	switch c.cut {
	case cutStdout:
		return markTruncated(out), kept(errb), true
	case cutStderr:
		return kept(out), markTruncated(errb), true
	}
	return kept(out), kept(errb), false
}

// kept returns b, a prefix of an append-only stream, as a string sharing
// its bytes: a later Write appends past len(b) (or to a new array) and
// never changes them. A run's output is up to MaxOutput bytes, and this
// is the only place it would otherwise be copied on the node.
func kept(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// markTruncated returns b without a trailing incomplete UTF-8 sequence,
// followed by TruncatedSuffix on its own line.
func markTruncated(b []byte) string {
	b = trimPartialRune(b)
	s := make([]byte, 0, len(b)+1+len(TruncatedSuffix))
	s = append(s, b...)
	if len(b) > 0 && b[len(b)-1] != '\n' {
		s = append(s, '\n')
	}
	s = append(s, TruncatedSuffix...)
	return string(s)
}

// trimPartialRune drops a UTF-8 sequence cut short at the end of b. Bytes
// that are not UTF-8 at all are left alone: only a cut we made is repaired.
func trimPartialRune(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < utf8.RuneSelf {
			return b // ASCII: nothing pending
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}

// Tail returns the last bytes of the combined output: everything when the
// process wrote at most the tail size, otherwise the last tail-size bytes
// (less any UTF-8 continuation bytes split off at the front) prefixed with
// "…", so the result is at most the tail size plus that marker.
func (c *Capture) Tail() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := int64(len(c.tail))
	if c.total <= n {
		return string(c.tail[:c.total])
	}
	start := int(c.total % n)
	b := make([]byte, 0, len(tailMarker)+len(c.tail))
	b = append(b, c.tail[start:]...)
	b = append(b, c.tail[:start]...)
	for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
		b = b[1:]
	}
	return tailMarker + string(b)
}

// Total returns how many bytes the process wrote in all, kept or not.
func (c *Capture) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}
