package kubernetes

import (
	"context"
	"fmt"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	netv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// client is the narrow Kubernetes client the driver uses: client-go's
// REST client per API group over a scheme of the five kinds it touches
// (pods, namespaces, network policies, access reviews, runtime classes),
// JSON only, instead of the generated clientset, which links every API
// group (about 190 more packages, and their initialisation in every
// exechost process: BENCHMARKS.md). The scheme is built when a client is
// made, never at package initialisation.
type client struct {
	core, net, authz, node *rest.RESTClient
	params                 runtime.ParameterCodec
}

func newClient(rc *rest.Config) (*client, error) {
	sch := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, netv1.AddToScheme, authv1.AddToScheme, nodev1.AddToScheme} {
		if err := add(sch); err != nil {
			return nil, fmt.Errorf("kubernetes client scheme: %w", err)
		}
	}
	codecs := serializer.NewCodecFactory(sch).WithoutConversion()
	mk := func(gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
		c := rest.CopyConfig(rc)
		c.GroupVersion = &gv
		c.APIPath = apiPath
		c.NegotiatedSerializer = codecs
		c.ContentType = runtime.ContentTypeJSON
		if c.UserAgent == "" {
			c.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		r, err := rest.RESTClientFor(c)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
		return r, nil
	}
	cl := &client{params: runtime.NewParameterCodec(sch)}
	var err error
	if cl.core, err = mk(corev1.SchemeGroupVersion, "/api"); err != nil {
		return nil, err
	}
	if cl.net, err = mk(netv1.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	if cl.authz, err = mk(authv1.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	if cl.node, err = mk(nodev1.SchemeGroupVersion, "/apis"); err != nil {
		return nil, err
	}
	return cl, nil
}

func (c *client) createPod(ctx context.Context, ns string, p *corev1.Pod, dryRun bool) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	opts := &metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	err := c.core.Post().Namespace(ns).Resource("pods").VersionedParams(opts, c.params).Body(p).Do(ctx).Into(out)
	return out, err
}

func (c *client) getPod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	err := c.core.Get().Namespace(ns).Resource("pods").Name(name).Do(ctx).Into(out)
	return out, err
}

func (c *client) listPods(ctx context.Context, ns, selector string) (*corev1.PodList, error) {
	out := &corev1.PodList{}
	err := c.core.Get().Namespace(ns).Resource("pods").VersionedParams(&metav1.ListOptions{LabelSelector: selector}, c.params).Do(ctx).Into(out)
	return out, err
}

func (c *client) watchPods(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.core.Get().Namespace(ns).Resource("pods").VersionedParams(&opts, c.params).Watch(ctx)
}

func (c *client) deletePod(ctx context.Context, ns, name string, grace int64) error {
	return c.core.Delete().Namespace(ns).Resource("pods").Name(name).Body(&metav1.DeleteOptions{GracePeriodSeconds: &grace}).Do(ctx).Error()
}

func (c *client) patchPod(ctx context.Context, ns, name string, mergePatch []byte) error {
	return c.core.Patch("application/merge-patch+json").Namespace(ns).Resource("pods").Name(name).Body(mergePatch).Do(ctx).Error()
}

func (c *client) getNamespace(ctx context.Context, name string) error {
	return c.core.Get().Resource("namespaces").Name(name).Do(ctx).Error()
}

func (c *client) getRuntimeClass(ctx context.Context, name string) (*nodev1.RuntimeClass, error) {
	out := &nodev1.RuntimeClass{}
	err := c.node.Get().Resource("runtimeclasses").Name(name).Do(ctx).Into(out)
	return out, err
}

func (c *client) getPolicy(ctx context.Context, ns, name string) (*netv1.NetworkPolicy, error) {
	out := &netv1.NetworkPolicy{}
	err := c.net.Get().Namespace(ns).Resource("networkpolicies").Name(name).Do(ctx).Into(out)
	return out, err
}

func (c *client) createPolicy(ctx context.Context, ns string, p *netv1.NetworkPolicy) error {
	return c.net.Post().Namespace(ns).Resource("networkpolicies").Body(p).Do(ctx).Error()
}

func (c *client) updatePolicy(ctx context.Context, ns string, p *netv1.NetworkPolicy) error {
	return c.net.Put().Namespace(ns).Resource("networkpolicies").Name(p.Name).Body(p).Do(ctx).Error()
}

func (c *client) deletePolicy(ctx context.Context, ns, name string) error {
	return c.net.Delete().Namespace(ns).Resource("networkpolicies").Name(name).Do(ctx).Error()
}

func (c *client) review(ctx context.Context, a authv1.ResourceAttributes) (bool, error) {
	out := &authv1.SelfSubjectAccessReview{}
	err := c.authz.Post().Resource("selfsubjectaccessreviews").Body(&authv1.SelfSubjectAccessReview{
		Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a},
	}).Do(ctx).Into(out)
	return out.Status.Allowed, err
}
