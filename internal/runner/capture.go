package runner

import (
	"sync"
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

// Capture collects a process's stdout and stderr under one shared byte cap
// without ever holding more than the cap plus a fixed tail ring in memory,
// however much the process writes: a 10 GB flood costs the same as 200 KB.
// It also keeps the last TailSize bytes of the combined stream for lifecycle
// events. Writes never fail, so a chatty process is never killed by SIGPIPE
// for exceeding the cap. Capture is safe for concurrent use by the stdout and
// stderr copiers.
type Capture struct {
	mu        sync.Mutex
	max       int
	kept      int
	stdout    []byte
	stderr    []byte
	truncated bool
	total     int64
	tail      []byte // ring buffer of the last tailCap bytes
	tailCap   int
	tailPos   int
	tailFull  bool
}

// NewCapture returns a Capture keeping at most max bytes (MaxOutput when
// max <= 0) and a tail of tail bytes (TailSize when tail <= 0).
func NewCapture(max, tail int) *Capture {
	if max <= 0 {
		max = MaxOutput
	}
	if tail <= 0 {
		tail = TailSize
	}
	return &Capture{max: max, tailCap: tail, tail: make([]byte, tail)}
}

// Stdout returns a writer for the process's standard output.
func (c *Capture) Stdout() *Stream { return &Stream{c: c, err: false} }

// Stderr returns a writer for the process's standard error.
func (c *Capture) Stderr() *Stream { return &Stream{c: c, err: true} }

// Stream is one side (stdout or stderr) of a Capture.
type Stream struct {
	c   *Capture
	err bool
}

// Write records p, keeping what fits under the cap. It always reports
// len(p) written.
func (s *Stream) Write(p []byte) (int, error) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	if room := c.max - c.kept; room > 0 {
		keep := p
		if len(keep) > room {
			keep = keep[:room]
		}
		if s.err {
			c.stderr = append(c.stderr, keep...)
		} else {
			c.stdout = append(c.stdout, keep...)
		}
		c.kept += len(keep)
		if len(keep) < len(p) {
			c.truncated = true
		}
	} else if len(p) > 0 {
		c.truncated = true
	}
	c.appendTail(p)
	return len(p), nil
}

func (c *Capture) appendTail(p []byte) {
	if len(p) >= c.tailCap {
		copy(c.tail, p[len(p)-c.tailCap:])
		c.tailPos, c.tailFull = 0, true
		return
	}
	n := copy(c.tail[c.tailPos:], p)
	if n < len(p) {
		copy(c.tail, p[n:])
		c.tailFull = true
	}
	c.tailPos = (c.tailPos + len(p)) % c.tailCap
	if c.tailPos == 0 && len(p) > 0 {
		c.tailFull = true
	}
}

// Result returns the kept stdout and stderr, with TruncatedSuffix appended
// to the stream that was written last when anything was cut, and whether
// output was truncated.
func (c *Capture) Result() (stdout, stderr string, truncated bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	stdout, stderr = string(c.stdout), string(c.stderr)
	if c.truncated {
		if len(c.stderr) > 0 && len(c.stdout) == 0 {
			stderr += "\n" + TruncatedSuffix
		} else {
			stdout += "\n" + TruncatedSuffix
		}
	}
	return stdout, stderr, c.truncated
}

// Tail returns the last bytes of the combined output (at most the tail
// size), prefixed with "…" when earlier output was dropped.
func (c *Capture) Tail() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.tailFull {
		return string(c.tail[:c.tailPos])
	}
	b := make([]byte, 0, c.tailCap+3)
	b = append(b, "…"...)
	b = append(b, c.tail[c.tailPos:]...)
	b = append(b, c.tail[:c.tailPos]...)
	return string(b)
}

// Total returns how many bytes the process wrote in all.
func (c *Capture) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}
