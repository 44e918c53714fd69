package kubeapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// reference decodes src with go.yaml.in/yaml/v3 (a test dependency only)
// into the shape parseYAML gives: scalars as their string values, nulls
// as nil.
func reference(src string) (any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	var conv func(n *yaml.Node) any
	conv = func(n *yaml.Node) any {
		switch n.Kind {
		case yaml.MappingNode:
			m := map[string]any{}
			for i := 0; i+1 < len(n.Content); i += 2 {
				m[n.Content[i].Value] = conv(n.Content[i+1])
			}
			return m
		case yaml.SequenceNode:
			out := []any{}
			for _, c := range n.Content {
				out = append(out, conv(c))
			}
			return out
		case yaml.AliasNode:
			return conv(n.Alias)
		}
		if n.Tag == "!!null" {
			return nil
		}
		return n.Value
	}
	return conv(doc.Content[0]), nil
}

// kubeconfigs are shapes kubeconfig files take: as kubectl writes them,
// as people write them by hand (flow style, quotes, comments), and as
// cloud CLIs write exec sections.
var kubeconfigs = []string{
	`apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t
    server: https://127.0.0.1:6443
  name: kind-kind
contexts:
- context:
    cluster: kind-kind
    user: kind-kind
  name: kind-kind
current-context: kind-kind
kind: Config
preferences: {}
users:
- name: kind-kind
  user:
    client-certificate-data: LS0tLS1CRUdJTg==
    client-key-data: LS0tLS1CRUdJTg==
`,
	`apiVersion: v1
kind: Config
clusters:
- name: exechost-test
  cluster: {server: "https://127.0.0.1:16443", certificate-authority: "/tmp/exechost-k8s/pki/ca.crt"}
users:
- name: admin
  user: {client-certificate: "/tmp/a.crt", client-key: "/tmp/a.key"}
contexts:
- name: exechost-test
  context: {cluster: exechost-test, user: admin}
current-context: exechost-test
`,
	`# a comment
apiVersion: v1   # trailing comment
current-context: "gke_proj_zone_name"
users:
  - name: 'it''s me'
    user:
      exec:
        apiVersion: client.authentication.k8s.io/v1beta1
        command: gke-gcloud-auth-plugin
        args: [--flag, "quoted # not a comment", 'x: y']
        env:
        - name: A
          value: "line\none\ttab \u00e9"
        - {name: B, value: ~}
        installHint: |
          Install gke-gcloud-auth-plugin for use with kubectl by following
          https://example/docs
        provideClusterInfo: true
        interactiveMode: IfAvailable
clusters:
- name: c
  cluster:
    server: https://example:443/path#frag
    insecure-skip-tls-verify: True
    extensions:
    - name: client.authentication.k8s.io/exec
      extension:
        audience: foo
        nested: {a: [1, 2, {b: c}], d: null}
contexts: []
preferences:
`,
	`---
clusters:
- name: multi
  cluster:
    server: |-
      https://literal
    certificate-authority-data: "LS0t
      LS0t"
users: [
  {name: u, user: {token: abc}},
  {name: v, user: {tokenFile: /var/run/token}}
]
`,
	"",
	"# only a comment\n",
	"key: value\nempty:\nlist:\n- \n- a\n",
}

func TestParseYAMLMatchesTheReference(t *testing.T) {
	for i, src := range kubeconfigs {
		got, err := parseYAML([]byte(src))
		if err != nil {
			t.Errorf("kubeconfig %d: %v", i, err)
			continue
		}
		want, err := reference(src)
		if err != nil {
			t.Fatalf("kubeconfig %d: the reference refuses it: %v", i, err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("kubeconfig %d: (-yaml.v3 +parseYAML)\n%s", i, d)
		}
	}
}

// TestParseYAMLRefuses: what a kubeconfig never needs is refused by
// name rather than misread.
func TestParseYAMLRefuses(t *testing.T) {
	for src, want := range map[string]string{
		"a: &x 1\nb: *x\n":     "an anchor",
		"a: *x\n":              "",
		"a: !!str 1\n":         "a tag",
		"a: 1\n---\nb: 2\n":    "more than one YAML document",
		"a: 1\na: 2\n":         `"a"`,
		"a:\n\t- b\n":          "cannot start any token",
		"a: {b: 1\n":           "flow mapping end",
		"a: \"open\n":          "double-quoted",
		"a: 1\n  b: 2\n":       "",
		"- a\nb: 1\n":          "not allowed",
		"a: [1, 2] trailing\n": "not allowed",
	} {
		_, err := parseYAML([]byte(src))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseYAML(%q) = %v, want an error naming %q", src, err, want)
		}
	}
}

// FuzzParseYAML: the parser never panics, and whatever it accepts turns
// into JSON the kubeconfig reader can decode or refuse. (Held to yaml.v3
// on kubeconfig-shaped input by TestParseYAMLMatchesTheReference; the two
// libraries fold odd multi-line plain scalars differently, which no
// kubeconfig writes, so a differential fuzz would test them, not us.)
func FuzzParseYAML(f *testing.F) {
	for _, k := range kubeconfigs {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, src string) {
		js, err := yamlToJSON([]byte(src))
		if err != nil {
			return
		}
		if !json.Valid(js) {
			t.Fatalf("yamlToJSON(%q) = %q: not JSON", src, js)
		}
		var kc kubeconfig
		_ = json.Unmarshal(js, &kc) // decodes or refuses; never panics
	})
}
