package runner

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/testproc"
)

// write is one Write call on a Capture: to stderr when err, else stdout.
type write struct {
	err  bool
	data string
}

// captured is everything a Capture reports, for cmp.Diff.
type captured struct {
	Stdout, Stderr string
	Truncated      bool
	Tail           string
	Total          int64
}

func runCapture(maxBytes, tailBytes int, writes []write) captured {
	c := NewCapture(maxBytes, tailBytes)
	for _, w := range writes {
		s := c.Stdout()
		if w.err {
			s = c.Stderr()
		}
		if n, err := s.Write([]byte(w.data)); n != len(w.data) || err != nil {
			panic("capture write reported a short write or an error")
		}
	}
	var got captured
	got.Stdout, got.Stderr, got.Truncated = c.Result()
	got.Tail, got.Total = c.Tail(), c.Total()
	return got
}

// model computes what a Capture must report, the slow and obvious way: keep
// every byte, then cut.
func model(maxBytes, tailBytes int, writes []write) captured {
	var all []byte
	var out, errb []byte
	cut := cutNone
	for _, w := range writes {
		all = append(all, w.data...)
		keep := w.data
		if room := maxBytes - len(out) - len(errb); len(keep) > room {
			keep = keep[:room]
			if cut == cutNone {
				cut = cutStdout
				if w.err {
					cut = cutStderr
				}
			}
		}
		if w.err {
			errb = append(errb, keep...)
		} else {
			out = append(out, keep...)
		}
	}
	mark := func(b []byte) string {
		// Drop a rune that starts within the last 3 bytes but is
		// incomplete.
		for i := len(b) - 1; i >= 0 && i >= len(b)-3; i-- {
			if utf8.RuneStart(b[i]) {
				if b[i] >= utf8.RuneSelf && !utf8.FullRune(b[i:]) {
					b = b[:i]
				}
				break
			}
		}
		s := string(b)
		if s != "" && !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		return s + TruncatedSuffix
	}
	got := captured{Stdout: string(out), Stderr: string(errb), Total: int64(len(all))}
	switch cut {
	case cutStdout:
		got.Stdout, got.Truncated = mark(out), true
	case cutStderr:
		got.Stderr, got.Truncated = mark(errb), true
	}
	if len(all) <= tailBytes {
		got.Tail = string(all)
	} else {
		t := all[len(all)-tailBytes:]
		for i := 0; i < 3 && len(t) > 0 && !utf8.RuneStart(t[0]); i++ {
			t = t[1:]
		}
		got.Tail = "…" + string(t)
	}
	return got
}

func TestCapture(t *testing.T) {
	out := func(s string) write { return write{data: s} }
	errw := func(s string) write { return write{err: true, data: s} }
	tests := []struct {
		name      string
		max, tail int
		writes    []write
		want      captured
	}{
		{
			name: "empty", max: 10, tail: 4,
			want: captured{},
		},
		{
			name: "exactly the cap is not truncated", max: 10, tail: 4,
			writes: []write{out("0123456789")},
			want:   captured{Stdout: "0123456789", Tail: "…6789", Total: 10},
		},
		{
			name: "one byte over the cap is truncated", max: 10, tail: 4,
			writes: []write{out("0123456789a")},
			want:   captured{Stdout: "0123456789\n" + TruncatedSuffix, Truncated: true, Tail: "…789a", Total: 11},
		},
		{
			name: "cap reached exactly, then an empty write", max: 10, tail: 4,
			writes: []write{out("01234"), errw("56789"), out("")},
			want:   captured{Stdout: "01234", Stderr: "56789", Tail: "…6789", Total: 10},
		},
		{
			name: "the stream that lost bytes gets the marker", max: 10, tail: 4,
			writes: []write{out("01234"), errw("567890"), out("x")},
			want:   captured{Stdout: "01234", Stderr: "56789\n" + TruncatedSuffix, Truncated: true, Tail: "…890x", Total: 12},
		},
		{
			name: "marker on the first stream cut, not the last written", max: 4, tail: 8,
			writes: []write{out("0123"), out("4"), errw("e")},
			want:   captured{Stdout: "0123\n" + TruncatedSuffix, Truncated: true, Tail: "01234e", Total: 6},
		},
		{
			name: "cut after a newline adds no blank line", max: 3, tail: 8,
			writes: []write{out("ab\ncd")},
			want:   captured{Stdout: "ab\n" + TruncatedSuffix, Truncated: true, Tail: "ab\ncd", Total: 5},
		},
		{
			name: "only stderr, cut", max: 2, tail: 8,
			writes: []write{errw("abc")},
			want:   captured{Stderr: "ab\n" + TruncatedSuffix, Truncated: true, Tail: "abc", Total: 3},
		},
		{
			name: "tail exactly full has no marker", max: 100, tail: 4,
			writes: []write{out("ab"), errw("cd")},
			want:   captured{Stdout: "ab", Stderr: "cd", Tail: "abcd", Total: 4},
		},
		{
			name: "tail wraps around the ring", max: 100, tail: 4,
			writes: []write{out("ab"), out("cde"), errw("f")},
			want:   captured{Stdout: "abcde", Stderr: "f", Tail: "…cdef", Total: 6},
		},
		{
			name: "tail after several wraps", max: 100, tail: 3,
			writes: []write{out("ab"), out("cd"), out("ef"), out("gh"), out("i")},
			want:   captured{Stdout: "abcdefghi", Tail: "…ghi", Total: 9},
		},
		{
			name: "one write larger than the tail", max: 100, tail: 3,
			writes: []write{out("x"), out("abcdefg")},
			want:   captured{Stdout: "xabcdefg", Tail: "…efg", Total: 8},
		},
		{
			name: "a cut rune is dropped", max: 5, tail: 16,
			writes: []write{out("abcd€")}, // € is 3 bytes: the cut keeps one
			want:   captured{Stdout: "abcd\n" + TruncatedSuffix, Truncated: true, Tail: "abcd€", Total: 7},
		},
		{
			name: "a whole rune at the cut is kept", max: 7, tail: 16,
			writes: []write{out("abcd€x")},
			want:   captured{Stdout: "abcd€\n" + TruncatedSuffix, Truncated: true, Tail: "abcd€x", Total: 8},
		},
		{
			name: "binary bytes at the cut are kept", max: 3, tail: 16,
			writes: []write{out("a\xff\xfe\xfd")},
			want:   captured{Stdout: "a\xff\xfe\n" + TruncatedSuffix, Truncated: true, Tail: "a\xff\xfe\xfd", Total: 4},
		},
		{
			name: "tail does not start inside a rune", max: 100, tail: 4,
			writes: []write{out("a€bc")}, // last 4 bytes: two continuation bytes of €, b, c
			want:   captured{Stdout: "a€bc", Tail: "…bc", Total: 6},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runCapture(tt.max, tt.tail, tt.writes)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("capture (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(model(tt.max, tt.tail, tt.writes), got); diff != "" {
				t.Errorf("capture differs from the model (-model +got):\n%s", diff)
			}
		})
	}
}

func TestCaptureDefaults(t *testing.T) {
	c := NewCapture(0, -1)
	if c.max != MaxOutput || len(c.tail) != TailSize {
		t.Fatalf("NewCapture(0, -1) = max %d, tail %d; want %d, %d", c.max, len(c.tail), MaxOutput, TailSize)
	}
}

// TestCaptureMemoryBounded floods a Capture with far more than its cap and
// checks the memory it holds stays at the cap plus the ring.
func TestCaptureMemoryBounded(t *testing.T) {
	c := NewCapture(0, 0)
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	for range 1600 { // 100 MiB across both streams
		c.Stdout().Write(chunk)
		c.Stderr().Write(chunk)
	}
	if held := cap(c.stdout) + cap(c.stderr) + cap(c.tail); held > 2*MaxOutput+TailSize {
		t.Errorf("capture holds %d bytes after a 100 MiB flood; want at most %d", held, 2*MaxOutput+TailSize)
	}
	stdout, stderr, truncated := c.Result()
	if got, want := len(stdout)+len(stderr), MaxOutput+1+len(TruncatedSuffix); got != want || !truncated {
		t.Errorf("Result() = %d bytes, truncated %v; want %d bytes (the cap and the marker), truncated", got, truncated, want)
	}
	if got, want := c.Total(), int64(3200)*int64(len(chunk)); got != want {
		t.Errorf("Total() = %d, want %d", got, want)
	}
}

// TestCaptureConcurrentWriters writes distinct bytes from a stdout and a
// stderr goroutine at once (run it with -race) and checks no byte is lost
// from the count, mixed up between streams, or kept over the cap.
func TestCaptureConcurrentWriters(t *testing.T) {
	const (
		maxBytes = 100_000
		tail     = 1000
		writes   = 2000
	)
	c := NewCapture(maxBytes, tail)
	var wg sync.WaitGroup
	for _, w := range []struct {
		s *Stream
		b byte
	}{{c.Stdout(), 'o'}, {c.Stderr(), 'e'}} {
		wg.Go(func() {
			for i := range writes {
				w.s.Write(bytes.Repeat([]byte{w.b}, 1+i%97))
			}
		})
	}
	testproc.WaitGroup(t, &wg, "the concurrent writers")

	var wantTotal int64
	for i := range writes {
		wantTotal += 2 * int64(1+i%97)
	}
	if got := c.Total(); got != wantTotal {
		t.Errorf("Total() = %d, want %d", got, wantTotal)
	}
	stdout, stderr, truncated := c.Result()
	if !truncated {
		t.Fatalf("not truncated after %d bytes with a cap of %d", wantTotal, maxBytes)
	}
	stdout = strings.TrimSuffix(strings.TrimSuffix(stdout, TruncatedSuffix), "\n")
	stderr = strings.TrimSuffix(strings.TrimSuffix(stderr, TruncatedSuffix), "\n")
	if strings.Trim(stdout, "o") != "" || strings.Trim(stderr, "e") != "" {
		t.Errorf("streams mixed up: stdout has %q, stderr has %q beyond their own bytes", strings.Trim(stdout, "o"), strings.Trim(stderr, "e"))
	}
	if got := len(stdout) + len(stderr); got != maxBytes {
		t.Errorf("kept %d bytes, want exactly the cap %d", got, maxBytes)
	}
	tailText := c.Tail()
	if got := strings.Trim(strings.TrimPrefix(tailText, "…"), "oe"); got != "" || len(tailText) != len("…")+tail {
		t.Errorf("Tail() = %d bytes with foreign bytes %q; want %d bytes of o and e", len(tailText), got, tail)
	}
}

// FuzzCapture checks Capture against the model for arbitrary write
// sequences: the first two bytes pick the cap and tail size, then each
// chunk's length byte says how many following bytes form one write, and
// its high bit which stream gets it.
func FuzzCapture(f *testing.F) {
	f.Add([]byte{5, 3, 0x03, 'a', 'b', 'c', 0x84, 'd', 'e', 'f', 'g'})
	f.Add([]byte{10, 4, 0x0b, '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'x'})
	f.Add([]byte{4, 2, 0x06, 'a', 0xe2, 0x82, 0xac, 'b', 'c'})
	f.Add([]byte{1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		maxBytes, tail := 1+int(data[0]), 1+int(data[1]%64)
		var writes []write
		for rest := data[2:]; len(rest) > 0; {
			n := int(rest[0] & 0x7f)
			w := write{err: rest[0]&0x80 != 0}
			rest = rest[1:]
			n = min(n, len(rest))
			w.data, rest = string(rest[:n]), rest[n:]
			writes = append(writes, w)
		}
		if diff := cmp.Diff(model(maxBytes, tail, writes), runCapture(maxBytes, tail, writes)); diff != "" {
			t.Errorf("capture differs from the model (-model +got):\n%s", diff)
		}
	})
}

// BenchmarkCaptureWrite measures Capture alone past its cap, where a flood
// spends its time: 256 KiB writes (one pipe read each) feeding the tail.
//
//	go test -run '^$' -bench CaptureWrite ./internal/runner/
func BenchmarkCaptureWrite(b *testing.B) {
	c := NewCapture(0, 0)
	s := c.Stdout()
	chunk := make([]byte, copyBufSize)
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		s.Write(chunk)
	}
}

// TestCaptureResultUnchangedByLaterWrites: Result hands out the kept
// bytes without a copy, so a write after it (a straggling child still
// printing) must leave the text already handed out as it was.
func TestCaptureResultUnchangedByLaterWrites(t *testing.T) {
	c := NewCapture(64, 8)
	out := c.Stdout()
	out.Write([]byte("first"))
	c.Stderr().Write([]byte("err"))
	stdout, stderr, _ := c.Result()
	out.Write([]byte("second"))
	c.Stderr().Write([]byte("more"))
	if stdout != "first" || stderr != "err" {
		t.Fatalf("Result's text changed after later writes: %q %q", stdout, stderr)
	}
	if again, _, _ := c.Result(); again != "firstsecond" {
		t.Fatalf("Result = %q, want both writes", again)
	}
}
