package kubernetes

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/exechost/exechost/internal/sandbox/kubernetes/kubeapi"
)

// client is the driver's view of the API: the calls it makes, over
// kubeapi (plain HTTP and JSON, typed structs for the five kinds it
// touches: pods, namespaces, network policies, access reviews, runtime
// classes). It links no k8s.io package, so no exechost process pays
// client-go's initialisation (BENCHMARKS.md).
type client struct {
	*kubeapi.Client
}

func newClient(cfg *kubeapi.Config) (*client, error) {
	c, err := kubeapi.New(cfg)
	if err != nil {
		return nil, err
	}
	return &client{c}, nil
}

func podsPath(ns string) string { return "/api/v1/namespaces/" + url.PathEscape(ns) + "/pods" }

func podPath(ns, name string) string { return podsPath(ns) + "/" + url.PathEscape(name) }

func policiesPath(ns string) string {
	return "/apis/networking.k8s.io/v1/namespaces/" + url.PathEscape(ns) + "/networkpolicies"
}

func (c *client) createPod(ctx context.Context, ns string, p *kubeapi.Pod, dryRun bool) (*kubeapi.Pod, error) {
	out := &kubeapi.Pod{}
	// Strict: a field the server does not know (from an operator's
	// template) is an error, not silently dropped.
	q := url.Values{"fieldValidation": {"Strict"}}
	if dryRun {
		q.Set("dryRun", "All")
	}
	p.APIVersion, p.Kind = "v1", "Pod"
	err := c.Do(ctx, http.MethodPost, podsPath(ns), q, p, out)
	return out, err
}

func (c *client) getPod(ctx context.Context, ns, name string) (*kubeapi.Pod, error) {
	out := &kubeapi.Pod{}
	err := c.Do(ctx, http.MethodGet, podPath(ns, name), nil, nil, out)
	return out, err
}

func (c *client) listPods(ctx context.Context, ns, selector string) (*kubeapi.PodList, error) {
	out := &kubeapi.PodList{}
	err := c.Do(ctx, http.MethodGet, podsPath(ns), url.Values{"labelSelector": {selector}}, nil, out)
	return out, err
}

// watchPod watches one pod from resourceVersion on.
func (c *client) watchPod(ctx context.Context, ns, name, resourceVersion string) (*kubeapi.Watcher, error) {
	return c.Watch(ctx, podsPath(ns), url.Values{"fieldSelector": {"metadata.name=" + name}, "resourceVersion": {resourceVersion}})
}

func (c *client) deletePod(ctx context.Context, ns, name string, grace int64) error {
	return c.Do(ctx, http.MethodDelete, podPath(ns, name), url.Values{"gracePeriodSeconds": {strconv.FormatInt(grace, 10)}}, nil, nil)
}

func (c *client) patchPod(ctx context.Context, ns, name string, mergePatch []byte) error {
	return c.Patch(ctx, podPath(ns, name), mergePatch)
}

func (c *client) getNamespace(ctx context.Context, name string) error {
	return c.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+url.PathEscape(name), nil, nil, nil)
}

func (c *client) getRuntimeClass(ctx context.Context, name string) (*kubeapi.RuntimeClass, error) {
	out := &kubeapi.RuntimeClass{}
	err := c.Do(ctx, http.MethodGet, "/apis/node.k8s.io/v1/runtimeclasses/"+url.PathEscape(name), nil, nil, out)
	return out, err
}

func (c *client) getPolicy(ctx context.Context, ns, name string) (*kubeapi.NetworkPolicy, error) {
	out := &kubeapi.NetworkPolicy{}
	err := c.Do(ctx, http.MethodGet, policiesPath(ns)+"/"+url.PathEscape(name), nil, nil, out)
	return out, err
}

func (c *client) createPolicy(ctx context.Context, ns string, p *kubeapi.NetworkPolicy) error {
	p.APIVersion, p.Kind = "networking.k8s.io/v1", "NetworkPolicy"
	return c.Do(ctx, http.MethodPost, policiesPath(ns), nil, p, nil)
}

func (c *client) updatePolicy(ctx context.Context, ns string, p *kubeapi.NetworkPolicy) error {
	p.APIVersion, p.Kind = "networking.k8s.io/v1", "NetworkPolicy"
	return c.Do(ctx, http.MethodPut, policiesPath(ns)+"/"+url.PathEscape(p.Name), nil, p, nil)
}

func (c *client) deletePolicy(ctx context.Context, ns, name string) error {
	return c.Do(ctx, http.MethodDelete, policiesPath(ns)+"/"+url.PathEscape(name), nil, nil, nil)
}

func (c *client) review(ctx context.Context, a kubeapi.ResourceAttributes) (bool, error) {
	out := &kubeapi.SelfSubjectAccessReview{}
	err := c.Do(ctx, http.MethodPost, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", nil, &kubeapi.SelfSubjectAccessReview{
		APIVersion: "authorization.k8s.io/v1", Kind: "SelfSubjectAccessReview",
		Spec: kubeapi.SelfSubjectAccessReviewSpec{ResourceAttributes: &a},
	}, out)
	return out.Status.Allowed, err
}
