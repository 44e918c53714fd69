package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// checkKeys walks raw JSON alongside the Go type it will decode into and
// reports the first object key the type does not know, with its full path
// ("agents.list[1].tools.exec.hots"). encoding/json's DisallowUnknownFields
// names only the key, not where it is.
func checkKeys(path string, raw json.RawMessage, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshaler) {
		return nil // the type parses itself and reports its own errors
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if raw[0] != '{' {
			return nil // a type error, which json.Unmarshal reports
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("%s: %w", orRoot(path), err)
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			if !ok {
				return fmt.Errorf("%s: unknown key (known keys here: %s)", join(path, k), knownList(fields))
			}
			if err := checkKeys(join(path, k), m[k], ft); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if raw[0] != '[' {
			return nil
		}
		var els []json.RawMessage
		if err := json.Unmarshal(raw, &els); err != nil {
			return fmt.Errorf("%s: %w", orRoot(path), err)
		}
		for i, el := range els {
			if err := checkKeys(fmt.Sprintf("%s[%d]", path, i), el, t.Elem()); err != nil {
				return err
			}
		}
	case reflect.Map:
		if raw[0] != '{' {
			return nil
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("%s: %w", orRoot(path), err)
		}
		for k, v := range m {
			if err := checkKeys(join(path, k), v, t.Elem()); err != nil {
				return err
			}
		}
	}
	return nil
}

func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func knownList(fields map[string]reflect.Type) string {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orRoot(path string) string {
	if path == "" {
		return "top level"
	}
	return path
}
