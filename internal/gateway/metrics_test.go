package gateway_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/gateway"
	"github.com/exechost/exechost/internal/metrics"
)

// TestMetricsScrape runs real execs through an in-process gateway and a
// node and reads the Prometheus text a scraper would get.
func TestMetricsScrape(t *testing.T) {
	m := metrics.New()
	e := newEnv(t, `{"tools":{"exec":{"host":"gateway","security":"full","ask":"off"}}}`, func(o *gateway.Options) { o.Metrics = m })
	e.addNode(t, "n1", policyFull)
	agent := e.client(t, bridge.RoleAgent)
	if _, err := call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	if _, err := call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{Command: "false", Host: "node"}); err != nil {
		t.Fatal(err)
	}
	if _, err := call[bridge.ExecResult](t, agent, bridge.MethodExec, bridge.ExecParams{Command: "true", Security: "deny"}); err == nil {
		t.Fatal("security=deny ran")
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`exechost_execs_total{decision="allow",host="gateway",outcome="success"} 1`,
		`exechost_execs_total{decision="allow",host="node",outcome="failure"} 1`,
		`exechost_execs_total{decision="deny",host="gateway",outcome="denied"} 1`,
		`exechost_connected_nodes 1`,
		`exechost_node_invoke_seconds_count 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}
