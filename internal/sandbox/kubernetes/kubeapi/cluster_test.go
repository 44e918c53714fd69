package kubeapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/sandbox/kubernetes/kubeapi"
	"github.com/exechost/exechost/internal/sandbox/kubernetes/kubetest"
)

// TestCluster runs the client against the real test cluster
// (scripts/provision-kubernetes.sh): the admin kubeconfig as kubectl
// reads it, a pod created and watched until it runs, exec over the
// WebSocket channel protocol with the end of stdin (v5) and an exit code
// reported on the error channel, and a NotFound after the delete.
func TestCluster(t *testing.T) {
	env := kubetest.Cluster(t)
	cfg, err := kubeapi.Load(env.Kubeconfig, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubeapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pods := "/api/v1/namespaces/" + env.Namespace + "/pods"
	no, uid := false, int64(65534)
	pod := &kubeapi.Pod{APIVersion: "v1", Kind: "Pod", ObjectMeta: kubeapi.ObjectMeta{Name: "kubeapi-test"}, Spec: kubeapi.PodSpec{
		RestartPolicy: "Never", AutomountServiceAccountToken: &no,
		SecurityContext: &kubeapi.PodSecurityContext{RunAsUser: &uid},
		Containers:      []kubeapi.Container{{Name: "main", Image: kubetest.Image, ImagePullPolicy: "Never", Command: []string{"sleep", "3600"}}},
	}}
	created := &kubeapi.Pod{}
	if err := c.Do(ctx, http.MethodPost, pods, nil, pod, created); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, http.MethodPost, pods, nil, pod, nil); !kubeapi.IsAlreadyExists(err) {
		t.Errorf("second create: %v, want AlreadyExists", err)
	}
	w, err := c.Watch(ctx, pods, url.Values{"fieldSelector": {"metadata.name=kubeapi-test"}, "resourceVersion": {created.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := w.Next()
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		var p kubeapi.Pod
		if err := json.Unmarshal(ev.Object, &p); err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase == kubeapi.PodRunning {
			break
		}
	}
	w.Close()

	exec := func(stdin string, argv ...string) (string, error) {
		q := url.Values{"container": {"main"}, "stdout": {"true"}, "stderr": {"true"}, "command": argv}
		if stdin != "" {
			q.Set("stdin", "true")
		}
		var out bytes.Buffer
		s, err := c.Stream(ctx, pods+"/kubeapi-test/exec", q, kubeapi.StreamOptions{Stdout: &out, Stderr: &out})
		if err != nil {
			return "", err
		}
		if s.Protocol() != kubeapi.ProtocolV5 {
			t.Errorf("protocol = %s, want v5 from Kubernetes 1.34", s.Protocol())
		}
		if stdin != "" {
			if _, err := s.Write([]byte(stdin)); err != nil {
				return "", err
			}
			if err := s.CloseStdin(); err != nil {
				return "", err
			}
		}
		select {
		case <-s.Done():
		case <-ctx.Done():
			t.Fatal("exec did not end")
		}
		return out.String(), s.Err()
	}
	// cat ends only when its stdin does: v5's close reached it.
	if out, err := exec("through stdin", "cat"); out != "through stdin" || err != nil {
		t.Errorf("exec cat: %q, %v", out, err)
	}
	out, err := exec("", "sh", "-c", "echo bye; exit 3")
	if out != "bye\n" || err == nil || !strings.Contains(err.Error(), "exit code 3") {
		t.Errorf("exec exit 3: %q, %v; want the exit code reported", out, err)
	}
	if err := c.Do(ctx, http.MethodDelete, pods+"/kubeapi-test", url.Values{"gracePeriodSeconds": {"0"}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, http.MethodDelete, pods+"/no-such-pod", nil, nil, nil); !kubeapi.IsNotFound(err) {
		t.Errorf("delete of a missing pod: %v, want NotFound", err)
	}
}
