package approvals

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
)

// Marshal encodes f as the file is written: two-space indented JSON with a
// trailing newline, known fields in schema order (agent "*" first, the rest
// sorted), then preserved unknown members in their original order. Strings
// are not HTML-escaped, so a command such as "a && b" stays readable.
func (f *File) Marshal() ([]byte, error) {
	w := &writer{}
	w.enc = json.NewEncoder(&w.tmp)
	w.enc.SetEscapeHTML(false)

	top := w.object()
	v := f.Version
	if v == 0 {
		v = Version
	}
	top.key("version")
	w.buf.WriteString(strconv.Itoa(v))

	top.key("socket")
	s := w.object()
	s.str("path", f.Socket.Path)
	s.str("token", f.Socket.Token)
	s.extra(f.Socket.Extra, knownSocket)
	s.close()

	top.key("defaults")
	d := w.object()
	d.str("security", f.Defaults.Security)
	d.str("ask", f.Defaults.Ask)
	d.str("askFallback", f.Defaults.AskFallback)
	d.strings("envAllowlist", f.Defaults.EnvAllowlist)
	d.confine(f.Defaults.Confine)
	d.extra(f.Defaults.Extra, knownDefaults)
	d.close()

	top.key("agents")
	as := w.object()
	for _, id := range f.AgentIDs() {
		a := f.Agents[id]
		as.key(id)
		w.agent(a)
	}
	as.close()
	top.extra(f.Extra, knownTop)
	top.close()
	if w.err != nil {
		return nil, fmt.Errorf("marshal approvals: %w", w.err)
	}

	var out bytes.Buffer
	if err := json.Indent(&out, w.buf.Bytes(), "", "  "); err != nil {
		return nil, fmt.Errorf("marshal approvals: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// AgentIDs returns the ids in f.Agents in file order: "*" first, then
// sorted, skipping nil agents.
func (f *File) AgentIDs() []string {
	ids := make([]string, 0, len(f.Agents))
	for id, a := range f.Agents {
		if a != nil {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool {
		if (ids[i] == WildcardAgent) != (ids[j] == WildcardAgent) {
			return ids[i] == WildcardAgent
		}
		return ids[i] < ids[j]
	})
	return ids
}

func (w *writer) agent(a *Agent) {
	o := w.object()
	o.str("security", a.Security)
	o.str("ask", a.Ask)
	o.str("askFallback", a.AskFallback)
	o.strings("envAllowlist", a.EnvAllowlist)
	if len(a.Allowlist) > 0 {
		o.key("allowlist")
		w.buf.WriteByte('[')
		for i, e := range a.Allowlist {
			if i > 0 {
				w.buf.WriteByte(',')
			}
			eo := w.object()
			eo.str("id", e.ID)
			eo.key("pattern")
			w.string(e.Pattern)
			if e.LastUsedAt != 0 {
				eo.key("lastUsedAt")
				w.buf.WriteString(strconv.FormatInt(e.LastUsedAt, 10))
			}
			eo.str("lastUsedCommand", e.LastUsedCommand)
			eo.str("lastResolvedPath", e.LastResolvedPath)
			eo.str("sha256", e.SHA256)
			eo.argRule(e)
			eo.grant(e)
			eo.extra(e.Extra, knownEntry)
			eo.close()
		}
		w.buf.WriteByte(']')
	}
	o.confine(a.Confine)
	o.extra(a.Extra, knownAgent)
	o.close()
}

// writer builds compact JSON that Marshal then indents.
type writer struct {
	buf bytes.Buffer
	tmp bytes.Buffer
	enc *json.Encoder
	err error
}

func (w *writer) string(s string) {
	w.tmp.Reset()
	if err := w.enc.Encode(s); err != nil && w.err == nil {
		w.err = err
	}
	w.buf.Write(bytes.TrimSuffix(w.tmp.Bytes(), []byte{'\n'}))
}

func (w *writer) object() *objectWriter {
	w.buf.WriteByte('{')
	return &objectWriter{w: w, seen: map[string]bool{}}
}

type objectWriter struct {
	w    *writer
	seen map[string]bool
}

func (o *objectWriter) key(k string) {
	if len(o.seen) > 0 {
		o.w.buf.WriteByte(',')
	}
	if o.seen[k] && o.w.err == nil {
		o.w.err = fmt.Errorf("duplicate key %q", k)
	}
	o.seen[k] = true
	o.w.string(k)
	o.w.buf.WriteByte(':')
}

// str writes a string member, omitting it when empty (empty means unset).
func (o *objectWriter) str(k, v string) {
	if v == "" {
		return
	}
	o.key(k)
	o.w.string(v)
}

// strings writes a non-empty array of strings.
func (o *objectWriter) strings(k string, v []string) {
	if len(v) == 0 {
		return
	}
	o.key(k)
	o.w.buf.WriteByte('[')
	for i, s := range v {
		if i > 0 {
			o.w.buf.WriteByte(',')
		}
		o.w.string(s)
	}
	o.w.buf.WriteByte(']')
}

// extra writes preserved members. A member named like a known field (only
// possible when built by hand) is refused rather than duplicated.
func (o *objectWriter) extra(e Extra, known []string) {
	for _, m := range e {
		for _, k := range known {
			if k == m.Key && o.w.err == nil {
				o.w.err = fmt.Errorf("extra member %q shadows a known field", k)
			}
		}
		if !json.Valid(m.Value) && o.w.err == nil {
			o.w.err = fmt.Errorf("extra member %q is not valid JSON", m.Key)
		}
		o.key(m.Key)
		o.w.buf.Write(m.Value)
	}
}

func (o *objectWriter) close() { o.w.buf.WriteByte('}') }

// MarshalJSON makes a File embedded in a wire payload (a remote `approvals
// get`) encode exactly as the file does, unknown members included.
func (f *File) MarshalJSON() ([]byte, error) { return f.Marshal() }

// UnmarshalJSON decodes with Parse, so a File received on the wire gets the
// same checks as one read from disk.
func (f *File) UnmarshalJSON(data []byte) error {
	g, err := Parse("<json>", data)
	if err != nil {
		return err
	}
	*f = *g
	return nil
}
