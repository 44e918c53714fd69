package approvals

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Parse decodes the content of an approvals file. path only names the file
// in errors. Every error is a *ParseError with the line and column of the
// offending token; Parse never guesses at a value of the wrong type.
func Parse(path string, data []byte) (*File, error) {
	p := &parser{path: path, data: data}
	return p.file()
}

// parser decodes the file in one streaming pass, knowing at every step the
// byte offset of the value it is about to read, for error positions.
type parser struct {
	path     string
	data     []byte
	dec      *json.Decoder
	warnings []string
}

// Known member names per object, for the "did you mean" warnings.
var (
	knownTop      = []string{"version", "socket", "defaults", "agents"}
	knownSocket   = []string{"path", "token"}
	knownDefaults = []string{"security", "ask", "askFallback", "envAllowlist", "confine"}
	knownAgent    = []string{"security", "ask", "askFallback", "allowlist", "envAllowlist", "confine"}
	knownEntry    = []string{"id", "pattern", "lastUsedAt", "lastUsedCommand", "lastResolvedPath", "sha256", "args", "deny", "examples", "counterExamples", "expiresAt", "scope"}
)

func (p *parser) file() (*File, error) {
	if !json.Valid(p.data) {
		var raw json.RawMessage
		return nil, p.syntaxError(json.Unmarshal(p.data, &raw))
	}
	p.dec = json.NewDecoder(bytes.NewReader(p.data))
	p.dec.UseNumber()
	f := &File{Agents: map[string]*Agent{}}
	sawVersion := false
	err := p.object("top level", func(key string, off int) error {
		var err error
		switch key {
		case "version":
			var v int
			if v, err = p.version(off); err == nil && v != 0 {
				f.Version, sawVersion = v, true
			}
		case "socket":
			err = p.object("socket", func(key string, off int) error {
				switch key {
				case "path":
					return p.str(&f.Socket.Path, "socket.path", off)
				case "token":
					return p.str(&f.Socket.Token, "socket.token", off)
				}
				return p.extra(&f.Socket.Extra, "socket", key, knownSocket)
			})
		case "defaults":
			d := &f.Defaults
			err = p.object("defaults", func(key string, off int) error {
				switch key {
				case "security":
					return p.str(&d.Security, "defaults.security", off)
				case "ask":
					return p.str(&d.Ask, "defaults.ask", off)
				case "askFallback":
					return p.str(&d.AskFallback, "defaults.askFallback", off)
				case "envAllowlist":
					return p.strings(&d.EnvAllowlist, "defaults.envAllowlist", off)
				case "confine":
					return p.confine(&d.Confine, "defaults.confine", off)
				}
				return p.extra(&d.Extra, "defaults", key, knownDefaults)
			})
		case "agents":
			err = p.object("agents", func(id string, off int) error {
				if p.null(off) {
					return p.skipValue()
				}
				a, err := p.agent("agents." + id)
				if err == nil {
					f.Agents[id] = a
				}
				return err
			})
		default:
			err = p.extra(&f.Extra, "top level", key, knownTop)
		}
		return err
	})
	if err != nil {
		var pe *ParseError
		if !errors.As(err, &pe) { // the decoder disagreed with json.Valid: still a position
			err = p.errAt(int(p.dec.InputOffset()), "%v", err)
		}
		return nil, err
	}
	if !sawVersion {
		f.Version, f.versionMissing = Version, true
	}
	f.warnings = p.warnings
	return f, nil
}

func (p *parser) agent(where string) (*Agent, error) {
	a := &Agent{}
	err := p.object(where, func(key string, off int) error {
		switch key {
		case "security":
			return p.str(&a.Security, where+".security", off)
		case "ask":
			return p.str(&a.Ask, where+".ask", off)
		case "askFallback":
			return p.str(&a.AskFallback, where+".askFallback", off)
		case "allowlist":
			return p.allowlist(&a.Allowlist, where+".allowlist", off)
		case "envAllowlist":
			return p.strings(&a.EnvAllowlist, where+".envAllowlist", off)
		case "confine":
			return p.confine(&a.Confine, where+".confine", off)
		}
		return p.extra(&a.Extra, where, key, knownAgent)
	})
	return a, err
}

func (p *parser) allowlist(list *[]Entry, where string, off int) error {
	if p.null(off) {
		return p.skipValue()
	}
	if p.data[off] != '[' {
		return p.typeError(off, where, "an array")
	}
	if _, err := p.dec.Token(); err != nil {
		return p.errAt(off, "%s: %v", where, err)
	}
	for i := 0; p.dec.More(); i++ {
		ew := fmt.Sprintf("%s[%d]", where, i)
		var e Entry
		err := p.object(ew, func(key string, off int) error {
			switch key {
			case "id":
				return p.str(&e.ID, ew+".id", off)
			case "pattern":
				return p.str(&e.Pattern, ew+".pattern", off)
			case "lastUsedAt":
				return p.int64(&e.LastUsedAt, ew+".lastUsedAt", off)
			case "lastUsedCommand":
				return p.str(&e.LastUsedCommand, ew+".lastUsedCommand", off)
			case "lastResolvedPath":
				return p.str(&e.LastResolvedPath, ew+".lastResolvedPath", off)
			case "sha256":
				return p.str(&e.SHA256, ew+".sha256", off)
			case "args", "deny", "examples", "counterExamples":
				return p.argRule(&e, key, ew, off)
			case "expiresAt":
				return p.int64(&e.ExpiresAt, ew+".expiresAt", off)
			case "scope":
				return p.scope(&e.Scope, ew+".scope", off)
			}
			return p.extra(&e.Extra, ew, key, knownEntry)
		})
		if err != nil {
			return err
		}
		*list = append(*list, e)
	}
	_, err := p.dec.Token() // ']'
	return err
}

func (p *parser) syntaxError(err error) error {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return p.errAt(0, "%v", err)
	}
	off := int(se.Offset) - 1 // Offset is just past the offending byte
	if strings.HasPrefix(se.Error(), "unexpected end") {
		off = len(p.data)
	}
	return p.errAt(off, "%v", err)
}

// errAt returns a *ParseError positioned at byte offset off.
func (p *parser) errAt(off int, format string, args ...any) error {
	line, col := position(p.data, off)
	return &ParseError{Path: p.path, Line: line, Col: col, Err: fmt.Errorf(format, args...)}
}

// position converts a byte offset into a 1-based line and byte column.
func position(data []byte, off int) (line, col int) {
	off = max(0, min(off, len(data)))
	before := data[:off]
	line = 1 + bytes.Count(before, []byte{'\n'})
	col = off - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

func (p *parser) typeError(off int, where, want string) error {
	return p.errAt(off, "%s: expected %s, found %s", where, want, kind(p.data[off:]))
}

func kind(v []byte) string {
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// next returns the offset of the value (or key) the decoder reads next:
// past whitespace and the ':' or ',' before it. The document is known to be
// valid JSON, so nothing else can stand in between.
func (p *parser) next() int {
	i := int(p.dec.InputOffset())
	for i < len(p.data) {
		switch p.data[i] {
		case ' ', '\t', '\r', '\n', ':', ',':
			i++
			continue
		}
		break
	}
	return i
}

func (p *parser) null(off int) bool { return bytes.HasPrefix(p.data[off:], []byte("null")) }

func (p *parser) skipValue() error {
	var raw json.RawMessage
	return p.dec.Decode(&raw)
}

// object reads the object starting at the next offset (null counts as an
// empty object) and calls member for each key, with the offset of its
// value; member must consume exactly that value. Duplicate keys are
// refused: which of two "security" values applies is exactly the kind of
// ambiguity a policy file must not have.
func (p *parser) object(where string, member func(key string, valOff int) error) error {
	off := p.next()
	if p.null(off) {
		return p.skipValue()
	}
	if p.data[off] != '{' {
		return p.typeError(off, where, "an object")
	}
	if _, err := p.dec.Token(); err != nil {
		return p.errAt(off, "%s: %v", where, err)
	}
	seen := make(map[string]bool)
	for p.dec.More() {
		keyOff := p.next()
		tok, err := p.dec.Token()
		if err != nil {
			return p.errAt(keyOff, "%s: %v", where, err)
		}
		key, _ := tok.(string)
		if seen[key] {
			return p.errAt(keyOff, "%s: duplicate key %q", where, key)
		}
		seen[key] = true
		if err := member(key, p.next()); err != nil {
			return err
		}
	}
	_, err := p.dec.Token() // '}'
	return err
}

// extra keeps an unknown member's value (compacted, so a rewrite re-indents
// it consistently) and warns when its key differs from a known one only by
// case, the typo that would otherwise silently do nothing.
func (p *parser) extra(e *Extra, where, key string, known []string) error {
	for _, k := range known {
		if strings.EqualFold(k, key) {
			p.warnings = append(p.warnings, fmt.Sprintf("%s: unknown field %q is ignored (did you mean %q?)", where, key, k))
		}
	}
	var raw json.RawMessage
	if err := p.dec.Decode(&raw); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return err
	}
	*e = append(*e, Member{Key: key, Value: buf.Bytes()})
	return nil
}

func (p *parser) str(dst *string, where string, off int) error {
	if p.null(off) {
		return p.skipValue()
	}
	if p.data[off] != '"' {
		return p.typeError(off, where, "a string")
	}
	return p.dec.Decode(dst)
}

func (p *parser) number(where string, off int) (string, error) {
	if p.null(off) {
		return "", p.skipValue()
	}
	if kind(p.data[off:]) != "a number" {
		return "", p.typeError(off, where, "a number")
	}
	var n json.Number
	err := p.dec.Decode(&n)
	return string(n), err
}

func (p *parser) int64(dst *int64, where string, off int) error {
	s, err := p.number(where, off)
	if err != nil || s == "" {
		return err
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		*dst = n
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v != math.Trunc(v) || v < math.MinInt64 || v >= math.MaxInt64 {
		return p.errAt(off, "%s: %s is not a whole number in range", where, s)
	}
	*dst = int64(v)
	return nil
}

// version returns the declared version, or 0 when it is null.
func (p *parser) version(off int) (int, error) {
	s, err := p.number("version", off)
	if err != nil || s == "" {
		return 0, err
	}
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil:
		return 0, p.errAt(off, "version %s is not an integer", s)
	case n > Version:
		return 0, p.errAt(off, "version %d: %w (this exechost reads version %d)", n, ErrUnsupportedVersion, Version)
	case n < 1:
		return 0, p.errAt(off, "version %d is not valid (this exechost reads version %d)", n, Version)
	}
	return int(n), nil
}
