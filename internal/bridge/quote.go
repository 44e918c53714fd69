package bridge

import (
	"encoding/binary"
	"strconv"
	"unicode/utf8"
)

// A command's output is the one large string on the wire, and escaping it
// is the node's share of what output costs a round trip. appendQuoted
// writes it as Marshal does, byte for byte (FuzzCodec holds it to
// that), but copies runs of plain ASCII — what build logs and listings
// are made of — eight bytes to a test and one append per run.

// appendQuoted appends s as a JSON string exactly as Marshal encodes it:
// ", \ and control characters escaped (\b \f \n \r \t short, the others as
// \u00XX), <, > and & as \u003c, \u003e and \u0026, U+2028 and U+2029 as
// \u2028 and \u2029, every byte of invalid UTF-8 as U+FFFD, everything else
// as it is.
func appendQuoted(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		j := i
		for j+8 <= len(s) && plain8(s[j:j+8]) {
			j += 8
		}
		for j < len(s) && plainByte(s[j]) {
			j++
		}
		dst = append(dst, s[i:j]...)
		if j == len(s) {
			break
		}
		c := s[j]
		if c < utf8.RuneSelf {
			dst = appendEscapedASCII(dst, c)
			i = j + 1
			continue
		}
		r, n := utf8.DecodeRuneInString(s[j:])
		switch {
		case r == utf8.RuneError && n == 1:
			dst = append(dst, "\uFFFD"...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, `\u202`...)
			dst = append(dst, "0123456789abcdef"[r&0xf])
		default:
			dst = append(dst, s[j:j+n]...)
		}
		i = j + n
	}
	return append(dst, '"')
}

// plainByte reports whether c is written as it is: printable ASCII other
// than ", \, <, > and &, or DEL.
func plainByte(c byte) bool {
	return c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

// plain8 reports whether all of s's 8 bytes are plainByte, with word-wide
// tests: a byte below 0x20, one with the high bit set, or one equal to
// any of the five escaped characters fails it.
func plain8(s string) bool {
	return escapes8(binary.LittleEndian.Uint64([]byte(s))) == 0
}

// escapes8 is plain8's test of 8 bytes read as a little-endian word: a
// byte is flagged (high bit of its lane) when it is below 0x20, at or
// above 0x80, or one of " \ < > &. Each (v-lo)&^v&hi term flags a zero
// lane of v exactly: a borrow only starts at a zero lane.
func escapes8(x uint64) uint64 {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q, b, l, g, a := x^('"'*lo), x^('\\'*lo), x^('<'*lo), x^('>'*lo), x^('&'*lo)
	return ((x-0x20*lo)&^x | x | (q-lo)&^q | (b-lo)&^b | (l-lo)&^l | (g-lo)&^g | (a-lo)&^a) & hi
}

// appendEscapedASCII appends the escape of an ASCII byte that is not
// plainByte.
func appendEscapedASCII(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	dst = append(dst, `\u00`...)
	if c < 0x10 {
		dst = append(dst, '0')
	}
	return strconv.AppendUint(dst, uint64(c), 16)
}
