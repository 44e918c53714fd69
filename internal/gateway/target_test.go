package gateway_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/gateway"
	"github.com/exechost/exechost/internal/metrics"
)

// nodeInvokes is how many node.invoke round trips the gateway has made:
// every request it sends a node is one.
func nodeInvokes(t *testing.T, m *metrics.Metrics) uint64 {
	t.Helper()
	var b strings.Builder
	if err := m.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, "exechost_node_invoke_seconds_count "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			return n
		}
	}
	return 0
}

// TestNodeDenialExplainedByTheNode: a real node's denial arrives with
// which level of its exec-approvals.json decided (and the file's unknown
// keys), so the gateway explains it completely with the one system.run
// request and asks the node nothing afterwards.
func TestNodeDenialExplainedByTheNode(t *testing.T) {
	m := metrics.New()
	e := newEnv(t, fullConfig, func(o *gateway.Options) { o.Metrics = m })
	const pol = `{"version":1,"defaults":{"security":"allowlist","ask":"off","askFallback":"deny"},
		"agents":{"main":{"allowlst":[{"pattern":"/usr/bin/uname"}]},"ci":{"security":"deny"},"asker":{"ask":"on-miss"}}}`
	id := e.addNode(t, "deny-box", pol)
	agent := e.client(t, bridge.RoleAgent)
	label := "deny-box (" + id[:8] + "…)"
	unknown := []string{"agents.main.allowlst (did you mean allowlist?)"}
	for _, tc := range []struct {
		agent, command string
		want           bridge.DenialSource
		fix            string
	}{
		{"main", "/usr/bin/id", bridge.DenialSource{Host: label, Level: "defaults", Setting: "security=allowlist ask=off", Key: "ask"},
			"exechost approvals allowlist add --node deny-box --agent main /usr/bin/id"},
		{"ci", "/usr/bin/id", bridge.DenialSource{Host: label, Level: "agents.ci", Setting: "security=deny", Key: "security"}, ""},
		// No approver answers on the node: askFallback decides.
		{"asker", "/usr/bin/id", bridge.DenialSource{Host: label, Level: "defaults", Setting: "askFallback=deny", Key: "askFallback"},
			"exechost approvals allowlist add --node deny-box --agent asker /usr/bin/id"},
	} {
		t.Run(tc.agent, func(t *testing.T) {
			before := nodeInvokes(t, m)
			_, err := call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{Command: tc.command, Host: "node", Node: "deny-box", AgentID: tc.agent})
			var be *bridge.Error
			if !errors.As(err, &be) || be.Code != bridge.CodeDenied || be.Denial == nil || be.Denial.Policy == nil {
				t.Fatalf("exec = %v; want a DENIED error with its denial's policy", err)
			}
			if n := nodeInvokes(t, m) - before; n != 1 {
				t.Errorf("the gateway sent the node %d requests for one denied exec; want 1 (system.run alone)", n)
			}
			d := be.Denial
			if diff := cmp.Diff(tc.want, *d.Policy, cmpopts.IgnoreFields(bridge.DenialSource{}, "File")); diff != "" {
				t.Errorf("policy (-want +got):\n%s", diff)
			}
			if !strings.HasSuffix(d.Policy.File, "/exec-approvals.json") {
				t.Errorf("policy file = %q; want the node's exec-approvals.json", d.Policy.File)
			}
			if diff := cmp.Diff(unknown, d.UnknownKeys); diff != "" {
				t.Errorf("unknown keys (-want +got):\n%s", diff)
			}
			if d.Fix != tc.fix {
				t.Errorf("fix = %q; want %q", d.Fix, tc.fix)
			}
		})
	}
}

// TestNodeDenialCarriesConstruct: a command no analysis can see through is
// refused by the node, whose denial carries the construct and its
// position; the gateway relays them (it analyses nothing itself).
func TestNodeDenialCarriesConstruct(t *testing.T) {
	e := newEnv(t, fullConfig)
	const pol = `{"version":1,"defaults":{"security":"allowlist","ask":"off","askFallback":"deny"},
		"agents":{"main":{"allowlist":[{"pattern":"/usr/bin/echo"},{"pattern":"/usr/bin/id"}]}}}`
	e.addNode(t, "construct-box", pol)
	agent := e.client(t, bridge.RoleAgent)
	_, err := call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{Command: "$(id) x", Host: "node", Node: "construct-box", AgentID: "main"})
	var be *bridge.Error
	if !errors.As(err, &be) || be.Code != bridge.CodeDenied || be.Denial == nil {
		t.Fatalf("exec = %v; want a DENIED error with its denial", err)
	}
	// A substitution naming the program stays a miss under either rule
	// set (docs/policy.md, "What the walls contain"); which words name it
	// depends on whether the node's jail holds.
	if d := be.Denial; !strings.HasPrefix(d.Construct, "command substitution") || d.Position != "1:1" || d.Hint == "" {
		t.Errorf("denial = %+v; want the node's construct at 1:1 and a hint about it", *d)
	}
}
