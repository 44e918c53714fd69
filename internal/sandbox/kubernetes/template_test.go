package kubernetes

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/sandbox"
)

func TestCheckQuantity(t *testing.T) {
	for _, q := range []string{"1", "250m", "128Mi", "1.5", ".5", "2Gi", "1e3", "1E-2", "+1k", "0"} {
		if err := checkQuantity(q); err != nil {
			t.Errorf("checkQuantity(%q) = %v", q, err)
		}
	}
	for _, q := range []string{"", "lots", "1x", "1MiB", "m", "--1", "1e", "1e+", ".", "1..2", "12q", "1 Gi"} {
		if checkQuantity(q) == nil {
			t.Errorf("checkQuantity(%q) accepted", q)
		}
	}
}

func TestLabelValue(t *testing.T) {
	for v, want := range map[string]string{"main": "main", "a.b-c_d": "a.b-c_d", "": "", "-x": "", "x-": "", "a b": "", "ä": "",
		strings.Repeat("a", 63): strings.Repeat("a", 63), strings.Repeat("a", 64): ""} {
		if got := labelValue(v); got != want {
			t.Errorf("labelValue(%q) = %q, want %q", v, got, want)
		}
	}
}

// TestTemplateUnderTheDriversPod: an operator's template keeps its
// labels, annotations and scheduling fields (those the typed pod does not
// model too); the driver's containers and security settings win; the
// config's runtime class, node selector and tolerations are added.
func TestTemplateUnderTheDriversPod(t *testing.T) {
	cfg := With(sandbox.Config{Backend: Name}, func(k *Config) {
		k.AgentImage = "agent:1"
		k.RuntimeClassName = "gvisor"
		k.NodeSelector = map[string]string{"pool": "agents"}
		k.Tolerations = []Toleration{{Key: "sandbox", Operator: "Exists", Effect: "NoSchedule"}}
		k.PodTemplate = json.RawMessage(`{"metadata":{"labels":{"team":"a","exechost.owner":"forged"},"annotations":{"note":"x"}},
			"spec":{"priorityClassName":"low","affinity":{"nodeAffinity":{}},"automountServiceAccountToken":true,
			"securityContext":{"runAsUser":0},"nodeSelector":{"zone":"z1"}}}`)
	}).WithDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	b := &Backend{cfg: cfg, k: ConfigOf(cfg), owner: "own"}
	p, err := b.podFor("p", "scope", "main")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Metadata struct{ Labels, Annotations map[string]string }
		Spec     map[string]json.RawMessage
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Metadata.Labels["team"] != "a" || got.Metadata.Labels[LabelOwner] != "own" || got.Metadata.Annotations["note"] != "x" {
		t.Errorf("metadata = %+v", got.Metadata)
	}
	want := map[string]string{
		"priorityClassName":            `"low"`,
		"affinity":                     `{"nodeAffinity":{}}`,
		"automountServiceAccountToken": `false`,
		"runtimeClassName":             `"gvisor"`,
		"nodeSelector":                 `{"pool":"agents","zone":"z1"}`,
		"tolerations":                  `[{"key":"sandbox","operator":"Exists","effect":"NoSchedule"}]`,
	}
	for k, v := range want {
		if string(got.Spec[k]) != v {
			t.Errorf("spec.%s = %s, want %s", k, got.Spec[k], v)
		}
	}
	if sc := string(got.Spec["securityContext"]); !strings.Contains(sc, `"runAsUser":65534`) || !strings.Contains(sc, `"runAsNonRoot":true`) {
		t.Errorf("spec.securityContext = %s, want the driver's", sc)
	}
}

// TestExecRefusesAnEgressList: pods have no egress relay, so a run that
// carries a list is refused by the backend itself, before any API call
// whatever the gateway checked first. The backend here has no client:
// without the check, Exec goes on towards the cluster and the test fails.
func TestExecRefusesAnEgressList(t *testing.T) {
	cfg := With(sandbox.Config{Backend: Name}, func(*Config) {}).WithDefaults()
	b := &Backend{cfg: cfg, k: ConfigOf(cfg), owner: "own"}
	req := sandbox.Request{Argv: []string{"true"}, AgentID: "main", Egress: &sandbox.Egress{Key: "k", Patterns: []string{"example.org:443"}}}
	if _, err := b.Exec(t.Context(), req); !errors.Is(err, sandbox.ErrNoEgress) {
		t.Fatalf("a run with an egress list: %v, want ErrNoEgress", err)
	}
}
