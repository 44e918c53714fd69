package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/sandbox/kubernetes/kubetest"
)

// TestSandboxKubernetes runs host=sandbox through a real gateway whose
// exechost.json names the kubernetes backend, on the test cluster: the
// command runs in a pod as the sandbox user, and the events and audit
// records are those of any sandbox run.
func TestSandboxKubernetes(t *testing.T) {
	env := kubetest.Cluster(t)
	// The default binary has the Kubernetes driver.
	c := newCluster(t, fmt.Sprintf(`{
		"tools": {"exec": {"host": "sandbox"}},
		"gateway": {"listen": "127.0.0.1:0"},
		"sandbox": {"backend": "kubernetes", "kubernetes": {
			"kubeconfig": %q, "namespace": %q, "image": %q, "agentImage": %q,
			"pullPolicy": "Never", "memory": "256m", "cpus": 0.5}},
	}`, env.Kubeconfig, env.Namespace, kubetest.Image, env.AgentImage))
	if strings.Contains(c.gw.Out.String(), "host=sandbox unavailable") {
		t.Fatalf("the gateway did not open the kubernetes backend:\n%s", c.gw.Out.String())
	}
	res, r := c.execJSON("--session", "k8s", "cat /etc/hostname; id -u")
	if r.code != 0 || res.Host != "sandbox" || !strings.HasPrefix(res.Stdout, "exechost-") || !strings.HasSuffix(res.Stdout, "\n65534\n") {
		t.Fatalf("exec host=sandbox: %+v\n%s", res, r)
	}
	// The session's first sandbox command said which path its commands
	// take; the next one does not repeat it.
	if r := c.cli("exec", "--session", "k8s-path", "true"); r.code != 0 || strings.Count(r.stderr, "[event] Sandbox kubernetes (id=") != 1 || !strings.Contains(r.stderr, "commands: resident agent (static)") {
		t.Errorf("first command of a session: want one event naming the path:\n%s", r)
	}
	pod := strings.SplitN(res.Stdout, "\n", 2)[0]
	if err := env.Client.Do(context.Background(), http.MethodGet, "/api/v1/namespaces/"+env.Namespace+"/pods/"+pod, nil, nil, nil); err != nil {
		t.Errorf("the command's pod %s: %v", pod, err)
	}
	if !hasPrefix(texts(res.Events), "Exec finished (node=sandbox, id="+res.RunID+", code=0)") {
		t.Errorf("events = %q", texts(res.Events))
	}
	found := false
	for _, rec := range auditLog(t, c.gwDir) {
		if rec.Event == audit.EventFinished && rec.RunID == res.RunID {
			found = true
			if rec.Host != "sandbox" || rec.ExitCode == nil || *rec.ExitCode != 0 {
				t.Errorf("finished record = %+v", rec)
			}
		}
	}
	if !found {
		t.Errorf("no finished audit record for run %s", res.RunID)
	}
	res, r = c.execJSON("--session", "k8s", "exit 7")
	if res.ExitCode != 7 || res.Host != "sandbox" {
		t.Errorf("exit 7 in the pod: %+v\n%s", res, r)
	}
}
