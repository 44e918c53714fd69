package shellcmd

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// arg is one word of a simple command. Static words have a value known
// before the command runs; dynamic ones (expansions, globs) are kept as
// written, for display, and may expand to any number of fields.
type arg struct {
	val    string // the value when static, else the source text
	static bool
	text   string // the word as written
	why    string // why the word is not static
}

// wordText returns a word as written, for messages.
func wordText(w *syntax.Word) string {
	if w == nil {
		return ""
	}
	var b strings.Builder
	if err := syntax.NewPrinter().Print(&b, w); err != nil {
		return "?"
	}
	return b.String()
}

// staticWord returns the value of a word made only of literal text and
// quotes, with no expansion of any kind (globs, braces and tildes count as
// expansions).
func staticWord(w *syntax.Word) (string, bool) {
	val, why := evalWord(w, "", false)
	return val, why == ""
}

// wordArg evaluates a word of a simple command. home enables tilde
// expansion of a leading unquoted "~" (shell text); without it a leading
// "~" makes the word dynamic.
func wordArg(w *syntax.Word, home string) arg {
	val, why := evalWord(w, home, true)
	if why != "" {
		t := wordText(w)
		return arg{val: t, text: t, why: why}
	}
	return arg{val: val, static: true, text: val}
}

// evalWord computes the value of a word without running anything. It
// returns a non-empty reason when the value depends on run-time state or on
// expansions (parameters, globs, braces, ~user).
func evalWord(w *syntax.Word, home string, tilde bool) (val, why string) {
	if w == nil || len(w.Parts) == 0 {
		return "", "empty word"
	}
	if l, ok := w.Parts[0].(*syntax.Lit); ok && len(w.Parts) == 1 && strings.IndexByte(l.Value, '\\') < 0 {
		// Plain text: its value and its mask are the text itself, as
		// unquoted would write them byte by byte.
		return wordValue(l.Value, l.Value, home, tilde)
	}
	var v, mask strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			unquoted(p.Value, &v, &mask)
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", "$'…' quoting"
			}
			v.WriteString(p.Value)
			mask.WriteString(strings.Repeat("x", len(p.Value)))
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", "$\"…\" quoting"
			}
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", "parameter expansion"
				}
				s := dquoted(l.Value)
				v.WriteString(s)
				mask.WriteString(strings.Repeat("x", len(s)))
			}
		case *syntax.ParamExp:
			return "", "parameter expansion"
		case *syntax.CmdSubst:
			return "", "command substitution"
		case *syntax.ArithmExp:
			return "", "arithmetic expansion"
		default:
			return "", "expansion"
		}
	}
	return wordValue(v.String(), mask.String(), home, tilde)
}

// wordValue finishes evalWord for a word whose quotes are removed (s) and
// whose mask is m.
func wordValue(s, m, home string, tilde bool) (val, why string) {
	if why := expansionIn(m); why != "" {
		return "", why
	}
	if strings.HasPrefix(m, "~") {
		if !tilde {
			return "", "tilde expansion"
		}
		// The tilde prefix runs to the first unquoted slash; every character
		// in it must be unquoted, or no expansion happens at all.
		end := strings.IndexByte(m, '/')
		if end < 0 {
			end = len(m)
		}
		if strings.Contains(m[:end], "x") || end != 1 {
			return "", "~user expansion"
		}
		if home == "" || !strings.HasPrefix(home, "/") {
			return "", "~ with no known home directory"
		}
		s = strings.TrimSuffix(home, "/") + s[1:]
		if s == "" {
			s = "/"
		}
	}
	return s, ""
}

// expansionIn reports glob, brace or stray "$" expansion in a word's mask,
// in which every quoted or escaped character has been replaced by 'x'.
func expansionIn(m string) string {
	if strings.ContainsAny(m, "*?") {
		return "glob"
	}
	if i := strings.IndexByte(m, '['); i >= 0 && strings.IndexByte(m[i:], ']') > 0 {
		return "glob"
	}
	// A "{" followed by "," or ".." and then "}" (linear, over-approximate).
	open, sep := false, false
	for i := 0; i < len(m); i++ {
		switch c := m[i]; {
		case c == '{':
			open = true
		case open && (c == ',' || c == '.' && i+1 < len(m) && m[i+1] == '.'):
			sep = true
		case c == '}':
			if sep {
				return "brace expansion"
			}
			open = false
		}
	}
	if strings.ContainsRune(m, '$') {
		return "a \"$\" whose meaning differs between shells"
	}
	return ""
}

// unquoted appends the value of unquoted literal text, where a backslash
// quotes the next character, and a mask in which quoted characters are 'x'.
func unquoted(s string, v, mask *strings.Builder) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			i++
			v.WriteByte(s[i])
			mask.WriteByte('x')
			continue
		}
		v.WriteByte(c)
		mask.WriteByte(c)
	}
}

// dquoted returns the value of literal text inside double quotes, where a
// backslash quotes only $, `, ", \ and newline.
func dquoted(s string) string {
	if !strings.ContainsRune(s, '\\') {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '$', '`', '"', '\\':
				i++
				b.WriteByte(s[i])
				continue
			case '\n':
				i++
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}
