package approvals

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// OpenClaw's view of exec-approvals.json.
//
// An OpenClaw gateway validates the file a node reports (and the file an
// operator sends) against a closed schema: a member it does not know makes
// the whole payload invalid. So a node shows OpenClaw exactly OpenClaw's
// members (OpenClawView), and an edit coming from OpenClaw replaces only
// those, keeping every exechost-only member of the current file
// (MergeOpenClawEdit): confine, envAllowlist, an entry's sha256 pin, and
// any member a newer exechost or another tool added. ExechostOnly lists
// what the view leaves out.

// ocSchema is one level of OpenClaw's schema (ExecApprovalsFileSchema in
// OpenClaw's gateway protocol): the members it accepts, and for the
// members that are objects, maps or arrays of objects, their own schema.
type ocSchema struct {
	members []string
	child   map[string]*ocSchema // object members
	mapOf   map[string]*ocSchema // maps (agents): id → object
	listOf  map[string]*ocSchema // arrays of objects (allowlist)
}

var (
	ocEntry  = &ocSchema{members: []string{"id", "pattern", "source", "commandText", "argPattern", "lastUsedAt", "lastUsedCommand", "lastResolvedPath"}}
	ocPolicy = []string{"security", "ask", "askFallback", "autoAllowSkills"}
	ocAgent  = &ocSchema{members: append(slices.Clone(ocPolicy), "allowlist", "mcpTools"), listOf: map[string]*ocSchema{"allowlist": ocEntry}}
	ocFile   = &ocSchema{
		members: []string{"version", "socket", "defaults", "agents"},
		child: map[string]*ocSchema{
			"socket":   {members: []string{"path", "token"}},
			"defaults": {members: ocPolicy},
		},
		mapOf: map[string]*ocSchema{"agents": ocAgent},
	}
)

// member is one JSON object member, in file order.
type member struct {
	key string
	val json.RawMessage
}

// object decodes a JSON object keeping member order; ok is false when
// data is not an object.
func object(data []byte) (obj []member, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		obj = append(obj, member{k, v})
	}
	return obj, true
}

func encodeObject(obj []member) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range obj {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.val)
	}
	b.WriteByte('}')
	return b.Bytes()
}

func array(data []byte) ([]json.RawMessage, bool) {
	var a []json.RawMessage
	if err := json.Unmarshal(data, &a); err != nil || a == nil && !bytes.Equal(bytes.TrimSpace(data), []byte("[]")) {
		return nil, false
	}
	return a, true
}

// project keeps only the members s knows, recursively.
func (s *ocSchema) project(data json.RawMessage) json.RawMessage {
	obj, ok := object(data)
	if !ok {
		return data
	}
	out := obj[:0]
	for _, m := range obj {
		if !slices.Contains(s.members, m.key) {
			continue
		}
		m.val = s.projectMember(m.key, m.val)
		out = append(out, m)
	}
	return encodeObject(out)
}

func (s *ocSchema) projectMember(key string, val json.RawMessage) json.RawMessage {
	switch {
	case s.child[key] != nil:
		return s.child[key].project(val)
	case s.mapOf[key] != nil:
		obj, ok := object(val)
		if !ok {
			return val
		}
		for i := range obj {
			obj[i].val = s.mapOf[key].project(obj[i].val)
		}
		return encodeObject(obj)
	case s.listOf[key] != nil:
		a, ok := array(val)
		if !ok {
			return val
		}
		for i := range a {
			a[i] = s.listOf[key].project(a[i])
		}
		b, _ := json.Marshal(a)
		return b
	}
	return val
}

// extras lists, as paths, the members of data s does not know.
func (s *ocSchema) extras(data json.RawMessage, where string) []string {
	obj, ok := object(data)
	if !ok {
		return nil
	}
	var out []string
	at := func(k string) string {
		if where == "" {
			return k
		}
		return where + "." + k
	}
	for _, m := range obj {
		if !slices.Contains(s.members, m.key) {
			out = append(out, at(m.key))
			continue
		}
		switch {
		case s.child[m.key] != nil:
			out = append(out, s.child[m.key].extras(m.val, at(m.key))...)
		case s.mapOf[m.key] != nil:
			inner, _ := object(m.val)
			for _, e := range inner {
				out = append(out, s.mapOf[m.key].extras(e.val, at(m.key)+"."+e.key)...)
			}
		case s.listOf[m.key] != nil:
			a, _ := array(m.val)
			for i, e := range a {
				out = append(out, s.listOf[m.key].extras(e, fmt.Sprintf("%s[%d]", at(m.key), i))...)
			}
		}
	}
	return out
}

// merge returns next (OpenClaw's members, in next's order) with cur's
// members s does not know appended, recursively: the edit replaces what
// OpenClaw knows and keeps the rest. Allowlist entries are matched by id,
// else by pattern; a map member (an agent) next drops keeps only cur's
// exechost-only members, and is left out when it has none.
func (s *ocSchema) merge(cur, next json.RawMessage) json.RawMessage {
	co, cok := object(cur)
	no, nok := object(next)
	if !nok {
		return next
	}
	if !cok {
		co = nil
	}
	find := func(obj []member, k string) (json.RawMessage, bool) {
		for _, m := range obj {
			if m.key == k {
				return m.val, true
			}
		}
		return nil, false
	}
	out := slices.Clone(no)
	for i, m := range out {
		cv, ok := find(co, m.key)
		if !ok {
			continue
		}
		switch {
		case s.child[m.key] != nil:
			out[i].val = s.child[m.key].merge(cv, m.val)
		case s.mapOf[m.key] != nil:
			out[i].val = s.mapOf[m.key].mergeMap(cv, m.val)
		case s.listOf[m.key] != nil:
			out[i].val = s.listOf[m.key].mergeList(cv, m.val)
		}
	}
	for _, m := range co {
		if slices.Contains(s.members, m.key) {
			if _, inNext := find(no, m.key); !inNext {
				// Next dropped the whole member: keep what of it is
				// exechost's.
				kept := json.RawMessage("{}")
				switch {
				case s.child[m.key] != nil:
					kept = s.child[m.key].merge(m.val, kept)
				case s.mapOf[m.key] != nil:
					kept = s.mapOf[m.key].mergeMap(m.val, kept)
				}
				if string(kept) != "{}" {
					out = append(out, member{m.key, kept})
				}
			}
			continue
		}
		out = append(out, m)
	}
	return encodeObject(out)
}

func (s *ocSchema) mergeMap(cur, next json.RawMessage) json.RawMessage {
	co, _ := object(cur)
	no, ok := object(next)
	if !ok {
		return next
	}
	out := slices.Clone(no)
	for i, m := range out {
		for _, c := range co {
			if c.key == m.key {
				out[i].val = s.merge(c.val, m.val)
			}
		}
	}
	for _, c := range co {
		if slices.ContainsFunc(no, func(m member) bool { return m.key == c.key }) {
			continue
		}
		if kept := s.merge(c.val, []byte("{}")); string(kept) != "{}" {
			out = append(out, member{c.key, kept})
		}
	}
	return encodeObject(out)
}

func (s *ocSchema) mergeList(cur, next json.RawMessage) json.RawMessage {
	ca, _ := array(cur)
	na, ok := array(next)
	if !ok {
		return next
	}
	str := func(e json.RawMessage, k string) string {
		obj, _ := object(e)
		for _, m := range obj {
			if m.key == k {
				var v string
				_ = json.Unmarshal(m.val, &v)
				return v
			}
		}
		return ""
	}
	used := make([]bool, len(ca))
	for i, e := range na {
		id, pat := str(e, "id"), str(e, "pattern")
		for j, c := range ca {
			if used[j] || !(id != "" && str(c, "id") == id || id == "" && strings.EqualFold(str(c, "pattern"), pat)) {
				continue
			}
			used[j] = true
			na[i] = s.merge(c, e)
			break
		}
	}
	b, _ := json.Marshal(na)
	return b
}

// OpenClawView returns f as an OpenClaw gateway may see it: the socket
// token removed and only the members of OpenClaw's schema, in file order.
func OpenClawView(f *File) (json.RawMessage, error) {
	data, err := f.Redacted().Marshal()
	if err != nil {
		return nil, err
	}
	return ocFile.project(data), nil
}

// ExechostOnly lists, as paths ("defaults.confine",
// "agents.*.allowlist[0].sha256"), the members of f that OpenClaw's schema
// lacks: they stay on this host, OpenClawView leaves them out and
// MergeOpenClawEdit keeps them.
func ExechostOnly(f *File) []string {
	data, err := f.Redacted().Marshal()
	if err != nil {
		return nil
	}
	return ocFile.extras(data, "")
}

// MergeOpenClawEdit returns the document an edit from OpenClaw (doc, in
// OpenClaw's schema) makes of cur: doc's members with every exechost-only
// member of cur kept (allowlist entries matched by id, else pattern). A
// doc with members outside OpenClaw's schema is refused naming them: it
// does not come from OpenClaw, and exechost-only settings are edited on
// the host (`exechost approvals set`).
func MergeOpenClawEdit(cur *File, doc []byte) ([]byte, error) {
	if _, ok := object(doc); !ok {
		return nil, fmt.Errorf("exec approvals file: not a JSON object")
	}
	if extra := ocFile.extras(doc, ""); len(extra) > 0 {
		return nil, fmt.Errorf("exec approvals file: %s: not in OpenClaw's schema (exechost-only settings are kept from this host's file and edited there with `exechost approvals set`)", strings.Join(extra, ", "))
	}
	data, err := cur.Redacted().Marshal()
	if err != nil {
		return nil, err
	}
	return ocFile.merge(data, doc), nil
}
