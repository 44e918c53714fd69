package kubernetes

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/kubernetes/kubeapi"
	"github.com/exechost/exechost/internal/sandbox/kubernetes/kubetest"
)

// TestWarmPodReceivesEnvAfterAdoption: a pod started for the pool, before
// any session existed, is adopted by a session and its first command sees
// that session's env; the next session adopts the refilled pod with its
// own. The control is a command of the same session without the env.
func TestWarmPodReceivesEnvAfterAdoption(t *testing.T) {
	b, _ := open(t, func(c *sandbox.Config) { *c = With(*c, func(k *Config) { k.PoolSize = 1 }) })
	for i, tok := range []string{"alpha-token", "beta-token"} {
		waitFor(t, "the warm pool to fill", func() bool { return b.PoolReady() == 1 })
		warm := b.pool.names()[0]
		session := "env-" + tok
		res := run(t, b, sandbox.Request{SessionKey: session, Command: `printf %s "$SESSION_TOKEN"`, Env: map[string]string{"SESSION_TOKEN": tok}})
		if res.Stdout != tok {
			t.Errorf("session %d's first command on the adopted pod printed %q, want its env %q", i, res.Stdout, tok)
		}
		adopted := false
		for _, h := range b.boxes.Handles() {
			adopted = adopted || h == warm
		}
		if !adopted {
			t.Errorf("session %d did not adopt the warm pod %s (pods %v)", i, warm, b.boxes.Handles())
		}
		if res := run(t, b, sandbox.Request{SessionKey: session, Command: `printf %s "$SESSION_TOKEN"`}); res.Stdout != "" {
			t.Errorf("a command without the env printed %q: env leaked between commands", res.Stdout)
		}
	}
}

// TestRuntimeClass: a RuntimeClass that exists is put on the pod, which
// runs; one that does not is refused when the backend opens, before any
// pod is made, naming the fix.
func TestRuntimeClass(t *testing.T) {
	env := kubetest.Cluster(t)
	name := "exechost-test-runc"
	ctx := context.Background()
	err := env.Client.Do(ctx, http.MethodPost, "/apis/node.k8s.io/v1/runtimeclasses", nil,
		&kubeapi.RuntimeClass{APIVersion: "node.k8s.io/v1", Kind: "RuntimeClass", ObjectMeta: kubeapi.ObjectMeta{Name: name}, Handler: "runc"}, nil)
	if err != nil && !kubeapi.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	b, _ := open(t, func(c *sandbox.Config) { *c = With(*c, func(k *Config) { k.RuntimeClassName = name }) })
	if res := run(t, b, sandbox.Request{Argv: []string{"echo", "ok"}}); res.Stdout != "ok\n" {
		t.Errorf("exec under RuntimeClass %s: %+v", name, res)
	}
	p, err := clientOf(t, b).getPod(ctx, b.k.Namespace, b.Pods()[0])
	if err != nil || p.Spec.RuntimeClassName == nil || *p.Spec.RuntimeClassName != name {
		t.Errorf("pod runtimeClassName = %v, %v; want %s", p.Spec.RuntimeClassName, err, name)
	}
	if !strings.Contains(b.CommandPath().Reason, "RuntimeClass "+name) {
		t.Errorf("the first command's path does not name the runtime: %s", b.CommandPath())
	}

	cfg := With(testConfig(t), func(k *Config) { k.RuntimeClassName = "exechost-no-such-runtime" })
	_, err = Open(ctx, cfg, t.TempDir())
	if !errors.Is(err, ErrNoRuntimeClass) || !strings.Contains(err.Error(), "kubectl get runtimeclass") {
		t.Errorf("Open with a missing RuntimeClass: %v, want ErrNoRuntimeClass with its fix", err)
	}
	// doctor says the same, before any probe pod.
	if _, err := diagnose(ctx, cfg, t.TempDir()); !errors.Is(err, ErrNoRuntimeClass) {
		t.Errorf("doctor with a missing RuntimeClass: %v, want ErrNoRuntimeClass", err)
	}
	found, err := diagnose(ctx, With(testConfig(t), func(k *Config) { k.RuntimeClassName = name }), t.TempDir())
	if err != nil || !strings.Contains(strings.Join(found.Isolation, "\n"), "runtime: runc") {
		t.Errorf("doctor under RuntimeClass %s: %+v, %v; want its handler named", name, found, err)
	}
}

// TestMissingNamespace: a namespace that does not exist is one clear error
// at Open, not a failure at the first command.
func TestMissingNamespace(t *testing.T) {
	cfg := With(testConfig(t), func(k *Config) { k.Namespace = "exechost-no-such-namespace" })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Open(ctx, cfg, t.TempDir())
	if !errors.Is(err, ErrNoNamespace) || !strings.Contains(err.Error(), "kubectl create namespace exechost-no-such-namespace") {
		t.Errorf("Open over a missing namespace: %v, want ErrNoNamespace with its fix", err)
	}
	if _, err := diagnose(ctx, cfg, t.TempDir()); !errors.Is(err, ErrNoNamespace) {
		t.Errorf("doctor over a missing namespace: %v, want ErrNoNamespace", err)
	}
}

// TestDeniedVerb: credentials bound to the Role minus one verb are refused
// at Open naming that verb; the control binds the whole Role to the same
// user, who then opens the backend.
func TestDeniedVerb(t *testing.T) {
	env := kubetest.Cluster(t)
	ctx := context.Background()
	user := "exechost-partial"
	type rule = map[string]any
	role := func(skipDelete bool) map[string]any {
		podVerbs := []string{"create", "get", "list", "watch", "patch"}
		if !skipDelete {
			podVerbs = append(podVerbs, "delete")
		}
		return map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": rule{"name": "exechost-sandbox"}, "rules": []rule{
			{"apiGroups": []string{""}, "resources": []string{"pods"}, "verbs": podVerbs},
			{"apiGroups": []string{""}, "resources": []string{"pods/attach"}, "verbs": []string{"create", "get"}},
			{"apiGroups": []string{"networking.k8s.io"}, "resources": []string{"networkpolicies"}, "verbs": []string{"create", "get", "update", "delete"}},
		}}
	}
	rbac := "/apis/rbac.authorization.k8s.io/v1/namespaces/" + env.Namespace
	if err := env.Client.Do(ctx, http.MethodPost, rbac+"/roles", nil, role(true), nil); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Do(ctx, http.MethodPost, rbac+"/rolebindings", nil, map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": rule{"name": "exechost-sandbox"},
		"roleRef":  rule{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "exechost-sandbox"},
		"subjects": []rule{{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}},
	}, nil); err != nil {
		t.Fatal(err)
	}
	cfg := With(env.Config(), func(k *Config) { k.Kubeconfig = kubetest.UserKubeconfig(t, user, "") })
	_, err := Open(ctx, cfg, t.TempDir())
	if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "may not delete pods") {
		t.Fatalf("Open without the delete verb: %v, want ErrForbidden naming it", err)
	}
	if _, err := diagnose(ctx, cfg, t.TempDir()); !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "may not delete pods") {
		t.Errorf("doctor without the delete verb: %v, want ErrForbidden naming it", err)
	}
	if err := env.Client.Do(ctx, http.MethodPut, rbac+"/roles/exechost-sandbox", nil, role(false), nil); err != nil {
		t.Fatal(err)
	}
	var b *Backend
	waitFor(t, "the whole Role to take effect", func() bool {
		b, err = Open(ctx, cfg, t.TempDir())
		return err == nil
	})
	defer b.Close(ctx)
	if res := run(t, b, sandbox.Request{Argv: []string{"true"}}); !res.Success {
		t.Errorf("exec with the whole Role: %+v", res)
	}
}

// TestDoctor: doctor's probe pod pulls the images and starts the agent,
// and deletes itself; an image the node cannot pull is reported by doctor
// rather than at a session's first command.
func TestDoctor(t *testing.T) {
	env := kubetest.Cluster(t)
	cfg := env.Config()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	found, err := diagnose(ctx, cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(found.Detail, "probe pod") || found.Commands == nil || !strings.Contains(strings.Join(found.Isolation, "\n"), "runtime: the node's default (runc)") {
		t.Errorf("doctor = %+v", found)
	}
	bad := With(cfg, func(k *Config) { k.Image = "exechost.test/no-such-image:1" })
	if _, err := diagnose(ctx, bad, t.TempDir()); !errors.Is(err, ErrPodStart) || !strings.Contains(err.Error(), "ErrImageNeverPull") {
		t.Errorf("doctor with an image the node cannot pull: %v, want ErrPodStart naming ErrImageNeverPull", err)
	}
	list := &kubeapi.PodList{}
	err = env.Client.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+env.Namespace+"/pods", url.Values{"labelSelector": {LabelScope + "=doctor"}}, nil, list)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			t.Errorf("doctor left pod %s", p.Name)
		}
	}
}

// TestRuntimeWalls: what doctor says each runtime walls off; gVisor has
// no Landlock.
func TestRuntimeWalls(t *testing.T) {
	for handler, want := range map[string]string{
		"":      "node's default (runc)",
		"runsc": "without Landlock",
		"kata":  "VM per pod",
		"crun":  "the runtime's to say",
	} {
		if got := runtimeWalls(handler); !strings.Contains(got, want) {
			t.Errorf("runtimeWalls(%q) = %q, want %q", handler, got, want)
		}
	}
}
