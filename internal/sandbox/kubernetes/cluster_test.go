package kubernetes

import (
	"context"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/kubernetes/kubeapi"
	"github.com/exechost/exechost/internal/sandbox/kubernetes/kubetest"
	"github.com/exechost/exechost/internal/testproc"
)

// The tests run against the real single-node cluster that
// scripts/provision-kubernetes.sh brings up (package kubetest).

// testConfig is a kubernetes sandbox config over a fresh namespace of the
// test cluster.
func testConfig(t *testing.T) sandbox.Config {
	return kubetest.Cluster(t).Config()
}

// open opens a backend over the test cluster with its own state directory
// (so its own owner), closed at the end of the test; it returns the state
// directory too.
func open(t *testing.T, edit func(*sandbox.Config)) (*Backend, string) {
	t.Helper()
	cfg := testConfig(t)
	if edit != nil {
		edit(&cfg)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := Open(ctx, cfg, dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	return b, dir
}

// ownedPods lists the pods of b's owner that are not being deleted.
func ownedPods(t *testing.T, b *Backend) []kubeapi.Pod {
	t.Helper()
	list, err := clientOf(t, b).listPods(context.Background(), b.k.Namespace, b.ownerSelector())
	if err != nil {
		t.Fatal(err)
	}
	var out []kubeapi.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// waitFor polls cond (state in the API server or a pod, which has no
// event to wait on here) until it holds, failing after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testproc.Poll(t, time.Minute, what, cond)
}

// clientOf is a client of its own over b's credentials, for the tests'
// own checks.
func clientOf(t *testing.T, b *Backend) *client {
	t.Helper()
	cs, err := newClient(b.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
