package kubernetes

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/exechost/exechost/internal/sandbox"
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
func ownedPods(t *testing.T, b *Backend) []corev1.Pod {
	t.Helper()
	list, err := clientOf(t, b).CoreV1().Pods(b.k.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: b.ownerSelector()})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
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

// clientOf is a full client-go clientset over b's credentials, for the
// tests' own checks (the driver itself links only the narrow client).
func clientOf(t *testing.T, b *Backend) k8s.Interface {
	t.Helper()
	cs, err := k8s.NewForConfig(b.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
