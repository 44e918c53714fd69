package kubeapi

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// parseYAML reads a kubeconfig with goccy/go-yaml's parser (chosen for
// its package init: a few kB, where yaml.v3's regexps cost every exechost
// process 26 kB at start, BENCHMARKS.md) into maps, slices, strings and
// nil: every scalar stays the text it was written as (flexBool reads
// booleans), so "0123" stays a string, as kubectl reads it. Tags,
// anchors, aliases, merge keys, duplicate keys and more than one document
// are refused by name: a kubeconfig needs none of them.
func parseYAML(src []byte) (any, error) {
	f, err := parser.ParseBytes(src, 0)
	if err != nil {
		return nil, fmt.Errorf("YAML: %w", err)
	}
	var docs []*ast.DocumentNode
	for _, d := range f.Docs {
		if d != nil && d.Body != nil {
			docs = append(docs, d)
		}
	}
	switch len(docs) {
	case 0:
		return nil, nil
	case 1:
		return yamlValue(docs[0].Body)
	}
	return nil, errors.New("more than one YAML document in a kubeconfig")
}

// yamlValue is the value of one node (see parseYAML).
func yamlValue(n ast.Node) (any, error) {
	switch n := n.(type) {
	case *ast.MappingNode:
		m := make(map[string]any, len(n.Values))
		for _, kv := range n.Values {
			if err := yamlPair(m, kv); err != nil {
				return nil, err
			}
		}
		return m, nil
	case *ast.MappingValueNode:
		m := map[string]any{}
		if err := yamlPair(m, n); err != nil {
			return nil, err
		}
		return m, nil
	case *ast.SequenceNode:
		out := make([]any, 0, len(n.Values))
		for _, v := range n.Values {
			x, err := yamlValue(v)
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	case *ast.CommentGroupNode:
		return nil, nil
	case *ast.NullNode:
		return nil, nil
	case *ast.StringNode:
		return n.Value, nil
	case *ast.LiteralNode:
		return n.Value.Value, nil
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return n.GetToken().Value, nil
	case *ast.TagNode:
		return nil, yamlRefused("a tag", n)
	case *ast.AnchorNode:
		return nil, yamlRefused("an anchor", n)
	case *ast.AliasNode:
		return nil, yamlRefused("an alias", n)
	case *ast.MergeKeyNode:
		return nil, yamlRefused("a merge key", n)
	case nil:
		return nil, nil
	}
	return nil, yamlRefused(fmt.Sprintf("a %s node", n.Type()), n)
}

// yamlPair adds one key and its value to m.
func yamlPair(m map[string]any, kv *ast.MappingValueNode) error {
	if kv.Key == nil || kv.Key.IsMergeKey() {
		return yamlRefused("a merge key", kv)
	}
	k, err := yamlValue(kv.Key)
	if err != nil {
		return err
	}
	key, ok := k.(string)
	if !ok {
		return yamlRefused("a key that is not a scalar", kv)
	}
	if _, dup := m[key]; dup {
		return yamlRefused(fmt.Sprintf("key %q given twice", key), kv)
	}
	v, err := yamlValue(kv.Value)
	if err != nil {
		return err
	}
	m[key] = v
	return nil
}

func yamlRefused(what string, n ast.Node) error {
	if t := n.GetToken(); t != nil && t.Position != nil {
		return fmt.Errorf("line %d: %s in a kubeconfig", t.Position.Line, what)
	}
	return fmt.Errorf("%s in a kubeconfig", what)
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
