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

type parser struct {
	path     string
	data     []byte
	warnings []string
}

// member is one object member with the absolute byte offsets of its key and
// value in the file, for error positions.
type member struct {
	key            string
	keyOff, valOff int
	val            json.RawMessage
}

// Known member names per object, for the "did you mean" warnings.
var (
	knownTop      = []string{"version", "socket", "defaults", "agents"}
	knownSocket   = []string{"path", "token"}
	knownDefaults = []string{"security", "ask", "askFallback"}
	knownAgent    = []string{"security", "ask", "askFallback", "allowlist"}
	knownEntry    = []string{"id", "pattern", "lastUsedAt", "lastUsedCommand", "lastResolvedPath"}
)

func (p *parser) file() (*File, error) {
	var raw json.RawMessage
	if err := json.Unmarshal(p.data, &raw); err != nil {
		return nil, p.syntaxError(err)
	}
	start := len(p.data) - len(bytes.TrimLeft(p.data, " \t\r\n"))
	ms, err := p.members(raw, start, "top level")
	if err != nil {
		return nil, err
	}
	f := &File{Agents: map[string]*Agent{}}
	sawVersion := false
	for _, m := range ms {
		switch m.key {
		case "version":
			v, err := p.version(m)
			if err != nil {
				return nil, err
			}
			if v != 0 {
				f.Version, sawVersion = v, true
			}
		case "socket":
			err = p.socket(m, &f.Socket)
		case "defaults":
			err = p.defaults(m, &f.Defaults)
		case "agents":
			err = p.agents(m, f.Agents)
		default:
			f.Extra = p.extra(f.Extra, m, "top level", knownTop)
		}
		if err != nil {
			return nil, err
		}
	}
	if !sawVersion {
		f.Version, f.versionMissing = Version, true
	}
	f.warnings = p.warnings
	return f, nil
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

func (p *parser) typeError(off int, where, want string, got []byte) error {
	return p.errAt(off, "%s: expected %s, found %s", where, want, kind(got))
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

func isNull(v []byte) bool { return string(v) == "null" }

// skip returns the offset of the first byte at or after i in raw that is
// neither JSON whitespace nor sep.
func skip(raw []byte, i int, sep byte) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\r' || raw[i] == '\n' || raw[i] == sep) {
		i++
	}
	return i
}

// members splits an object (already validated as JSON) into its members,
// refusing duplicate keys: which of two "security" values applies is
// exactly the kind of ambiguity a policy file must not have.
func (p *parser) members(raw []byte, base int, where string) ([]member, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, p.typeError(base, where, "an object", raw)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, p.errAt(base, "%s: %v", where, err)
	}
	var out []member
	seen := make(map[string]bool)
	for dec.More() {
		keyOff := skip(raw, int(dec.InputOffset()), ',')
		tok, err := dec.Token()
		if err != nil {
			return nil, p.errAt(base+keyOff, "%s: %v", where, err)
		}
		key, _ := tok.(string)
		valOff := skip(raw, int(dec.InputOffset()), ':')
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, p.errAt(base+valOff, "%s: %v", where, err)
		}
		if seen[key] {
			return nil, p.errAt(base+keyOff, "%s: duplicate key %q", where, key)
		}
		seen[key] = true
		out = append(out, member{key: key, keyOff: base + keyOff, valOff: base + valOff, val: v})
	}
	return out, nil
}

// elements splits an array into its elements, returned as members with
// empty keys.
func (p *parser) elements(raw []byte, base int, where string) ([]member, error) {
	if len(raw) == 0 || raw[0] != '[' {
		return nil, p.typeError(base, where, "an array", raw)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, p.errAt(base, "%s: %v", where, err)
	}
	var out []member
	for dec.More() {
		off := skip(raw, int(dec.InputOffset()), ',')
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, p.errAt(base+off, "%s: %v", where, err)
		}
		out = append(out, member{keyOff: base + off, valOff: base + off, val: v})
	}
	return out, nil
}

func join(where, key string) string {
	if where == "top level" {
		return key
	}
	return where + "." + key
}

// extra keeps an unknown member (compacted, so a rewrite re-indents it
// consistently) and warns when its key differs from a known one only by
// case, the typo that would otherwise silently do nothing.
func (p *parser) extra(e Extra, m member, where string, known []string) Extra {
	for _, k := range known {
		if strings.EqualFold(k, m.key) {
			p.warnings = append(p.warnings, fmt.Sprintf("%s: unknown field %q is ignored (did you mean %q?)", where, m.key, k))
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, m.val); err != nil {
		buf.Reset()
		buf.Write(m.val)
	}
	return append(e, Member{Key: m.key, Value: buf.Bytes()})
}

func (p *parser) str(m member, where string) (string, error) {
	if isNull(m.val) {
		return "", nil
	}
	var s string
	if m.val[0] != '"' || json.Unmarshal(m.val, &s) != nil {
		return "", p.typeError(m.valOff, join(where, m.key), "a string", m.val)
	}
	return s, nil
}

func (p *parser) int64(m member, where string) (int64, error) {
	if isNull(m.val) {
		return 0, nil
	}
	if k := kind(m.val); k != "a number" {
		return 0, p.typeError(m.valOff, join(where, m.key), "a number", m.val)
	}
	s := string(m.val)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v != math.Trunc(v) || v < math.MinInt64 || v >= math.MaxInt64 {
		return 0, p.errAt(m.valOff, "%s: %s is not a whole number in range", join(where, m.key), s)
	}
	return int64(v), nil
}

// version returns the declared version, or 0 when it is null.
func (p *parser) version(m member) (int, error) {
	if isNull(m.val) {
		return 0, nil
	}
	if kind(m.val) != "a number" {
		return 0, p.typeError(m.valOff, "version", "a number", m.val)
	}
	n, err := strconv.ParseInt(string(m.val), 10, 64)
	switch {
	case err != nil:
		return 0, p.errAt(m.valOff, "version %s is not an integer", m.val)
	case n > Version:
		return 0, p.errAt(m.valOff, "version %d: %w (this exechost reads version %d)", n, ErrUnsupportedVersion, Version)
	case n < 1:
		return 0, p.errAt(m.valOff, "version %d is not valid (this exechost reads version %d)", n, Version)
	}
	return int(n), nil
}

func (p *parser) socket(m member, s *Socket) error {
	if isNull(m.val) {
		return nil
	}
	ms, err := p.members(m.val, m.valOff, "socket")
	if err != nil {
		return err
	}
	for _, m := range ms {
		switch m.key {
		case "path":
			s.Path, err = p.str(m, "socket")
		case "token":
			s.Token, err = p.str(m, "socket")
		default:
			s.Extra = p.extra(s.Extra, m, "socket", knownSocket)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) defaults(m member, d *Defaults) error {
	if isNull(m.val) {
		return nil
	}
	ms, err := p.members(m.val, m.valOff, "defaults")
	if err != nil {
		return err
	}
	for _, m := range ms {
		switch m.key {
		case "security":
			d.Security, err = p.str(m, "defaults")
		case "ask":
			d.Ask, err = p.str(m, "defaults")
		case "askFallback":
			d.AskFallback, err = p.str(m, "defaults")
		default:
			d.Extra = p.extra(d.Extra, m, "defaults", knownDefaults)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) agents(m member, agents map[string]*Agent) error {
	if isNull(m.val) {
		return nil
	}
	ms, err := p.members(m.val, m.valOff, "agents")
	if err != nil {
		return err
	}
	for _, m := range ms {
		if isNull(m.val) {
			continue
		}
		a, err := p.agent(m, "agents."+m.key)
		if err != nil {
			return err
		}
		agents[m.key] = a
	}
	return nil
}

func (p *parser) agent(m member, where string) (*Agent, error) {
	ms, err := p.members(m.val, m.valOff, where)
	if err != nil {
		return nil, err
	}
	a := &Agent{}
	for _, m := range ms {
		switch m.key {
		case "security":
			a.Security, err = p.str(m, where)
		case "ask":
			a.Ask, err = p.str(m, where)
		case "askFallback":
			a.AskFallback, err = p.str(m, where)
		case "allowlist":
			a.Allowlist, err = p.allowlist(m, where+".allowlist")
		default:
			a.Extra = p.extra(a.Extra, m, where, knownAgent)
		}
		if err != nil {
			return nil, err
		}
	}
	return a, nil
}

func (p *parser) allowlist(m member, where string) ([]Entry, error) {
	if isNull(m.val) {
		return nil, nil
	}
	els, err := p.elements(m.val, m.valOff, where)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for i, el := range els {
		e, err := p.entry(el, fmt.Sprintf("%s[%d]", where, i))
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func (p *parser) entry(el member, where string) (Entry, error) {
	var e Entry
	ms, err := p.members(el.val, el.valOff, where)
	if err != nil {
		return e, err
	}
	for _, m := range ms {
		switch m.key {
		case "id":
			e.ID, err = p.str(m, where)
		case "pattern":
			e.Pattern, err = p.str(m, where)
		case "lastUsedAt":
			e.LastUsedAt, err = p.int64(m, where)
		case "lastUsedCommand":
			e.LastUsedCommand, err = p.str(m, where)
		case "lastResolvedPath":
			e.LastResolvedPath, err = p.str(m, where)
		default:
			e.Extra = p.extra(e.Extra, m, where, knownEntry)
		}
		if err != nil {
			return e, err
		}
	}
	return e, nil
}
