// Package textsafe is the one sanitiser for text a human reads that came
// from somewhere else: command text, paths, agent and node names, reasons,
// error messages from another host. A crafted string must not repaint a
// terminal (escape sequences), fake a second line (CR, LF, U+2028), or be
// displayed in an order other than its bytes' (bidi embeddings, overrides
// and isolates, zero-width characters). Every such character is shown as a
// visible escape instead of being dropped, so the human sees that it is
// there. The TUI, the line mode, notifications, the web page's text,
// `approvals pending`, `audit tail` and CLI errors all use it.
//
// It is a leaf package: no dependency beyond the standard library.
package textsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxLine is the default bound of Line in runes of output: long enough for
// any real command line a human can review, short enough that one value
// cannot scroll a terminal's whole history away.
const MaxLine = 4096

// truncMark ends a bounded line; the byte count tells the human that
// something was cut and how much.
const truncMark = "…(+%d bytes)"

// Unsafe reports whether r must not reach a human's screen as itself:
// control characters (C0, DEL, C1), format characters (Unicode Cf: bidi
// controls U+202A–202E and U+2066–2069, zero-width U+200B–200F, U+FEFF, tag
// characters, …), line and paragraph separators, private-use, surrogate
// and unassigned code points — everything that is not a graphic character
// or an ordinary space.
func Unsafe(r rune) bool {
	if r == ' ' {
		return false
	}
	return r == utf8.RuneError || !unicode.IsGraphic(r) || unicode.Is(unicode.Cf, r) ||
		unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r)
}

// Needs reports whether Text(s) would change s (an unsafe rune or invalid
// UTF-8), so callers can skip work for plain text.
func Needs(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n <= 1 {
				return true
			}
			continue // a real U+FFFD is graphic
		}
		if Unsafe(r) {
			return true
		}
	}
	return false
}

// Text escapes every unsafe rune visibly and never bounds: \n, \r and \t
// as themselves, other ASCII controls and invalid bytes as \xNN, every
// other unsafe rune as \uNNNN or \UNNNNNNNN. Printable text, including
// non-Latin scripts, is unchanged. The result holds no unsafe rune.
func Text(s string) string {
	if !Needs(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		piece, n := escapeOne(s[i:])
		b.WriteString(piece)
		i += n
	}
	return b.String()
}

// escapeOne returns the first rune of s as it is shown (itself, or its
// escape) and its length in bytes.
func escapeOne(s string) (string, int) {
	r, n := utf8.DecodeRuneInString(s)
	switch {
	case r == utf8.RuneError && n <= 1:
		return fmt.Sprintf(`\x%02x`, s[0]), 1
	case r == '\n':
		return `\n`, n
	case r == '\r':
		return `\r`, n
	case r == '\t':
		return `\t`, n
	case !Unsafe(r):
		return s[:n], n
	case r < 0x80:
		return fmt.Sprintf(`\x%02x`, r), n
	case r <= 0xffff:
		return fmt.Sprintf(`\u%04x`, r), n
	}
	return fmt.Sprintf(`\U%08x`, r), n
}

// Line is Text bounded to MaxLine runes of output: one inert line.
func Line(s string) string { return Bounded(s, MaxLine) }

// Bounded is Text cut to at most max runes of output (max below 32 is
// treated as 32, room for the truncation mark). A cut line ends with
// "…(+N bytes)", N counting the input bytes not shown; escapes are never
// split. It reads no further into s than the bound needs, so a huge value
// costs what a short one does.
func Bounded(s string, max int) string {
	if max < 32 {
		max = 32
	}
	// The mark with the longest count it can carry fits in the budget.
	budget := max - utf8.RuneCountInString(fmt.Sprintf(truncMark, len(s)))
	var b strings.Builder
	used, cut, cutLen := 0, -1, 0
	for i := 0; i < len(s); {
		piece, n := escapeOne(s[i:])
		k := utf8.RuneCountInString(piece)
		if cut < 0 && used+k > budget {
			cut, cutLen = i, b.Len()
		}
		if used += k; used > max {
			return b.String()[:cutLen] + fmt.Sprintf(truncMark, len(s)-cut)
		}
		b.WriteString(piece)
		i += n
	}
	return b.String()
}

// Strip drops every unsafe rune and invalid byte instead of escaping it,
// trims surrounding space and bounds the result to max runes (max <= 0:
// no bound). It is for short names a peer chooses (display names, client
// names) where an escape would be noise; text a human must judge uses
// Text or Line.
func Strip(s string, max int) string {
	var b strings.Builder
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if (r == utf8.RuneError && size <= 1) || Unsafe(r) {
			continue
		}
		if max > 0 && n == max {
			break
		}
		b.WriteRune(r)
		n++
	}
	return strings.TrimSpace(b.String())
}
