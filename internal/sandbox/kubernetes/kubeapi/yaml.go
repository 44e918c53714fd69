package kubeapi

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// parseYAML reads the subset of YAML that kubeconfig files use — block
// and flow mappings and sequences, plain, single- and double-quoted
// scalars, literal block scalars, comments — into maps,
// slices, strings and nil (every scalar stays a string; flexBool reads
// booleans). Anchors, aliases, tags and multiple documents are refused
// by name. It exists so that the binary links no YAML library, whose
// package init every exechost process would pay at start (BENCHMARKS.md);
// its tests hold it to go.yaml.in/yaml/v3 on kubeconfig-shaped input.
func parseYAML(src []byte) (any, error) {
	p := &yparser{}
	for i, raw := range strings.Split(strings.ReplaceAll(strings.ReplaceAll(string(src), "\r\n", "\n"), "\r", "\n"), "\n") {
		if !utf8.ValidString(raw) {
			return nil, fmt.Errorf("line %d: not UTF-8", i+1)
		}
		text := stripComment(raw)
		trimmed := strings.TrimSpace(text)
		if trimmed == "" {
			p.lines = append(p.lines, yline{n: i + 1, indent: -1, raw: raw})
			continue
		}
		if strings.HasPrefix(strings.TrimLeft(text, " "), "\t") {
			return nil, fmt.Errorf("line %d: a tab in the indentation", i+1)
		}
		if trimmed == "---" || strings.HasPrefix(trimmed, "--- ") || trimmed == "..." || strings.HasPrefix(trimmed, "%") {
			if trimmed == "---" && len(p.content()) == 0 {
				continue
			}
			return nil, fmt.Errorf("line %d: more than one YAML document (or a directive) in a kubeconfig", i+1)
		}
		ind := len(text) - len(strings.TrimLeft(text, " "))
		p.lines = append(p.lines, yline{n: i + 1, indent: ind, text: strings.TrimRight(text[ind:], " \t"), raw: raw})
	}
	p.skipBlank()
	if p.i >= len(p.lines) {
		return nil, nil
	}
	v, err := p.node(p.lines[p.i].indent)
	if err != nil {
		return nil, err
	}
	p.skipBlank()
	if p.i < len(p.lines) {
		return nil, fmt.Errorf("line %d: unexpected text %q", p.lines[p.i].n, p.lines[p.i].text)
	}
	return v, nil
}

type yline struct {
	n      int
	indent int // -1: blank or comment
	text   string
	raw    string
}

type yparser struct {
	lines []yline
	i     int
}

func (p *yparser) content() []yline {
	var out []yline
	for _, l := range p.lines {
		if l.indent >= 0 {
			out = append(out, l)
		}
	}
	return out
}

func (p *yparser) skipBlank() {
	for p.i < len(p.lines) && p.lines[p.i].indent < 0 {
		p.i++
	}
}

// stripComment cuts a comment: '#' at the start or after a space,
// outside quotes.
func stripComment(s string) string {
	var q byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case q != 0:
			if c == q {
				if q == '\'' && i+1 < len(s) && s[i+1] == '\'' {
					i++
					continue
				}
				q = 0
			} else if c == '\\' && q == '"' {
				i++
			}
		case c == '"' || c == '\'':
			if i == 0 || strings.ContainsRune(" \t[{,:-", rune(s[i-1])) {
				q = c
			}
		case c == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			return s[:i]
		}
	}
	return s
}

// node parses the node whose first line is the current one, at indent.
func (p *yparser) node(indent int) (any, error) {
	l := p.lines[p.i]
	switch {
	case l.text == "-" || strings.HasPrefix(l.text, "- "):
		return p.seq(l.indent)
	case isKeyLine(l.text):
		return p.mapping(l.indent)
	default:
		p.i++
		return p.inline(l.text, l.n, indent)
	}
}

// keyOf splits "key: rest" (key plain or quoted); ok is false when the
// line is no mapping entry.
func keyOf(s string) (key, rest string, ok bool, err error) {
	if s == "" {
		return "", "", false, nil
	}
	if s[0] == '"' || s[0] == '\'' {
		k, n, err := quoted(s)
		if err != nil {
			return "", "", false, err
		}
		r := strings.TrimLeft(s[n:], " ")
		if r == ":" || strings.HasPrefix(r, ": ") {
			return k, strings.TrimSpace(r[1:]), true, nil
		}
		return "", "", false, nil
	}
	if strings.ContainsRune("[{", rune(s[0])) {
		return "", "", false, nil
	}
	for i := 0; i < len(s); i++ {
		if s[i] == ':' && (i+1 == len(s) || s[i+1] == ' ') {
			return strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:]), true, nil
		}
	}
	return "", "", false, nil
}

func isKeyLine(s string) bool { _, _, ok, _ := keyOf(s); return ok }

func (p *yparser) mapping(indent int) (any, error) {
	m := map[string]any{}
	for {
		p.skipBlank()
		if p.i >= len(p.lines) || p.lines[p.i].indent != indent {
			break
		}
		l := p.lines[p.i]
		key, rest, ok, err := keyOf(l.text)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", l.n, err)
		}
		if !ok {
			return nil, fmt.Errorf("line %d: want \"key: value\", got %q", l.n, l.text)
		}
		if err := plainOK(key, l.n); err != nil {
			return nil, err
		}
		if _, dup := m[key]; dup {
			return nil, fmt.Errorf("line %d: key %q twice", l.n, key)
		}
		p.i++
		v, err := p.value(rest, l.n, indent, true)
		if err != nil {
			return nil, err
		}
		m[key] = v
	}
	if p.i < len(p.lines) && p.lines[p.i].indent > indent {
		l := p.lines[p.i]
		return nil, fmt.Errorf("line %d: unexpected indentation", l.n)
	}
	return m, nil
}

// value is what follows "key:" or "- ": inline text, or the block below.
func (p *yparser) value(rest string, n, indent int, inMap bool) (any, error) {
	if rest != "" && rest[0] != '|' && rest[0] != '>' {
		return p.inline(rest, n, indent)
	}
	if rest != "" {
		return p.blockScalar(rest, n, indent)
	}
	p.skipBlank()
	if p.i >= len(p.lines) {
		return nil, nil
	}
	next := p.lines[p.i]
	// A mapping's sequence may sit at the key's own indentation.
	if next.indent > indent || (inMap && next.indent == indent && (next.text == "-" || strings.HasPrefix(next.text, "- "))) {
		return p.node(next.indent)
	}
	return nil, nil
}

func (p *yparser) seq(indent int) (any, error) {
	out := []any{}
	for {
		p.skipBlank()
		if p.i >= len(p.lines) || p.lines[p.i].indent != indent {
			break
		}
		l := p.lines[p.i]
		if l.text != "-" && !strings.HasPrefix(l.text, "- ") {
			break
		}
		rest := strings.TrimLeft(strings.TrimPrefix(l.text, "-"), " ")
		if rest != "" && (isKeyLine(rest) || rest == "-" || strings.HasPrefix(rest, "- ")) {
			// "- key: v" opens a mapping at the column of key.
			col := indent + (len(l.text) - len(rest))
			p.lines[p.i] = yline{n: l.n, indent: col, text: rest, raw: l.raw}
			v, err := p.node(col)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
			continue
		}
		p.i++
		v, err := p.value(rest, l.n, indent, false)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// blockScalar reads a literal scalar (| or |-) below the line; folded
// ones (>) and the other headers are refused.
func (p *yparser) blockScalar(head string, n, indent int) (any, error) {
	chomp := head[1:]
	if head[0] != '|' || (chomp != "" && chomp != "-") {
		return nil, fmt.Errorf("line %d: block scalar %q is not supported in a kubeconfig (use | or |-, or a quoted string)", n, head)
	}
	var parts []string
	bi, last := -1, -1
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		raw := l.raw
		if strings.TrimSpace(raw) == "" {
			if bi >= 0 && len(raw) > bi {
				parts = append(parts, raw[bi:])
			} else {
				parts = append(parts, "")
			}
			p.i++
			continue
		}
		ind := len(raw) - len(strings.TrimLeft(raw, " "))
		if ind <= indent {
			break
		}
		if bi < 0 {
			bi = ind
		}
		if ind < bi {
			break
		}
		parts = append(parts, strings.TrimRight(raw[bi:], "\r"))
		last = p.i
		p.i++
	}
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	s := strings.Join(parts, "\n")
	// Clip keeps the last line break, if the source has one.
	if chomp != "-" && s != "" && last < len(p.lines)-1 {
		s += "\n"
	}
	return s, nil
}

// inline parses a scalar or a flow collection starting with text, which
// may continue on the following, more indented lines.
func (p *yparser) inline(text string, n, indent int) (any, error) {
	if text[0] == '[' || text[0] == '{' || text[0] == '"' || text[0] == '\'' {
		// Flow collections and quoted scalars may span lines.
		for {
			f := &flow{s: text}
			v, err := f.value()
			if err == nil {
				f.space()
				if f.i != len(f.s) {
					return nil, fmt.Errorf("line %d: unexpected text after the value: %q", n, f.s[f.i:])
				}
				return v, nil
			}
			if err != errFlowEOF || p.i >= len(p.lines) {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			// An open bracket or quote runs on until it closes,
			// whatever the indentation of its lines.
			next := p.lines[p.i]
			line := strings.TrimSpace(next.raw)
			if next.indent >= 0 && text[0] != '"' && text[0] != '\'' {
				line = next.text // in a flow collection, comments end lines
			}
			text += "\n" + line
			p.i++
		}
	}
	// A plain scalar may continue on more indented lines, folded.
	for p.i < len(p.lines) {
		next := p.lines[p.i]
		if next.indent < 0 || next.indent <= indent || isKeyLine(next.text) || strings.HasPrefix(next.text, "- ") {
			break
		}
		text += " " + next.text
		p.i++
	}
	if err := plainOK(text, n); err != nil {
		return nil, err
	}
	return plain(text), nil
}

func plainOK(s string, n int) error {
	complexKey := s == "?" || strings.HasPrefix(s, "? ")
	if complexKey || s != "" && strings.ContainsRune("&*!|>%@`", rune(s[0])) {
		return fmt.Errorf("line %d: %q: anchors, aliases, tags and reserved indicators are not supported in a kubeconfig", n, s)
	}
	return nil
}

// plain is a plain scalar's value: null for ~, null or nothing.
func plain(s string) any {
	switch s {
	case "", "~", "null", "Null", "NULL":
		return nil
	}
	return s
}

var errFlowEOF = fmt.Errorf("unterminated flow collection or quoted scalar")

type flow struct {
	s string
	i int
}

func (f *flow) space() {
	for f.i < len(f.s) && (f.s[f.i] == ' ' || f.s[f.i] == '\n' || f.s[f.i] == '\t') {
		f.i++
	}
}

func (f *flow) value() (any, error) {
	f.space()
	if f.i >= len(f.s) {
		return nil, errFlowEOF
	}
	switch c := f.s[f.i]; c {
	case '{':
		f.i++
		m := map[string]any{}
		for {
			f.space()
			if f.i >= len(f.s) {
				return nil, errFlowEOF
			}
			if f.s[f.i] == '}' {
				f.i++
				return m, nil
			}
			k, err := f.scalar(true)
			if err != nil {
				return nil, err
			}
			ks, _ := k.(string)
			f.space()
			var v any
			if f.i < len(f.s) && f.s[f.i] == ':' {
				f.i++
				f.space()
				if f.i < len(f.s) && (f.s[f.i] == ',' || f.s[f.i] == '}') {
					v = nil
				} else if v, err = f.value(); err != nil {
					return nil, err
				}
			}
			if _, dup := m[ks]; dup {
				return nil, fmt.Errorf("key %q twice", ks)
			}
			m[ks] = v
			if err := f.sep('}'); err != nil {
				return nil, err
			}
		}
	case '[':
		f.i++
		out := []any{}
		for {
			f.space()
			if f.i >= len(f.s) {
				return nil, errFlowEOF
			}
			if f.s[f.i] == ']' {
				f.i++
				return out, nil
			}
			v, err := f.value()
			if err != nil {
				return nil, err
			}
			out = append(out, v)
			if err := f.sep(']'); err != nil {
				return nil, err
			}
		}
	default:
		return f.scalar(false)
	}
}

// sep reads a ',' or peeks at the closing bracket.
func (f *flow) sep(end byte) error {
	f.space()
	if f.i >= len(f.s) {
		return errFlowEOF
	}
	switch f.s[f.i] {
	case ',':
		f.i++
		return nil
	case end:
		return nil
	}
	return fmt.Errorf("want ',' or %q at %q", end, f.s[f.i:])
}

// scalar reads a quoted or plain scalar inside a flow collection (a key
// when key: then ':' ends it too).
func (f *flow) scalar(key bool) (any, error) {
	if c := f.s[f.i]; c == '"' || c == '\'' {
		s, n, err := quoted(f.s[f.i:])
		if err != nil {
			return nil, err
		}
		f.i += n
		return s, nil
	}
	start := f.i
	for f.i < len(f.s) {
		c := f.s[f.i]
		if c == ',' || c == ']' || c == '}' || c == '\n' {
			break
		}
		if c == ':' && (f.i+1 == len(f.s) || f.s[f.i+1] == ' ' || f.s[f.i+1] == '\n') {
			break
		}
		if c == ':' && strings.ContainsRune(",]}[{", rune(f.s[f.i+1])) {
			return nil, fmt.Errorf("%q: a ':' before a flow indicator is ambiguous; write \": \"", f.s[start:f.i+2])
		}
		if (c == '[' || c == '{') && key {
			return nil, fmt.Errorf("a collection as a key is not supported")
		}
		f.i++
	}
	if f.i >= len(f.s) && !key {
		return nil, errFlowEOF
	}
	s := strings.TrimSpace(f.s[start:f.i])
	if err := plainOK(s, 0); err != nil {
		return nil, err
	}
	return plain(s), nil
}

// quoted reads a quoted scalar at the start of s and returns it and the
// bytes it took. Line breaks inside fold to a space.
func quoted(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == q && q == '\'' && i+1 < len(s) && s[i+1] == '\'':
			b.WriteByte('\'')
			i++
		case c == q:
			return b.String(), i + 1, nil
		case c == '\n':
			b.WriteByte(' ')
			for i+1 < len(s) && (s[i+1] == ' ' || s[i+1] == '\t') {
				i++
			}
		case c == '\\' && q == '"':
			if i+1 >= len(s) {
				return "", 0, errFlowEOF
			}
			i++
			switch e := s[i]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '0':
				b.WriteByte(0)
			case '"', '\\', '/', ' ':
				b.WriteByte(e)
			case 'x', 'u', 'U':
				w := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
				if i+w >= len(s) {
					return "", 0, errFlowEOF
				}
				r, err := strconv.ParseUint(s[i+1:i+1+w], 16, 32)
				if err != nil {
					return "", 0, fmt.Errorf("bad escape \\%c%s", e, s[i+1:i+1+w])
				}
				b.WriteRune(rune(r))
				i += w
			default:
				return "", 0, fmt.Errorf("unknown escape \\%c", e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, errFlowEOF
}

// yamlToJSON turns a kubeconfig into JSON for encoding/json.
func yamlToJSON(src []byte) ([]byte, error) {
	v, err := parseYAML(src)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// flexBool reads a YAML boolean kept as a string ("true", "False").
type flexBool bool

func (b *flexBool) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		var v bool
		if err := json.Unmarshal(data, &v); err != nil {
			return err
		}
		*b = flexBool(v)
		return nil
	}
	switch s {
	case "true", "True", "TRUE":
		*b = true
	case "false", "False", "FALSE", "":
		*b = false
	default:
		return fmt.Errorf("%q is not a boolean", s)
	}
	return nil
}
