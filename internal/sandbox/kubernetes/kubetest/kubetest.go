// Package kubetest gives tests the real single-node Kubernetes cluster that
// scripts/provision-kubernetes.sh runs on this machine (scripts/test.sh
// brings it up as root): its admin kubeconfig, a namespace per test, and an
// agent image made from a static build of this tree. Without a cluster it
// skips loudly, and fails under CI=true.
package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/docker/dockertest"
	"github.com/exechost/exechost/internal/sandbox/kubernetes/kubeapi"
	"github.com/exechost/exechost/internal/testdep"
)

// Image is the busybox image the script imports into the cluster.
const Image = "exechost.test/busybox:1"

// Dir is the running cluster's state directory: $EXECHOST_K8S_DIR, or the
// script's default.
func Dir() string {
	if d := os.Getenv("EXECHOST_K8S_DIR"); d != "" {
		return d
	}
	return "/tmp/exechost-k8s"
}

// Env is the cluster as one test sees it.
type Env struct {
	// Kubeconfig is the admin kubeconfig.
	Kubeconfig string
	// Namespace is the test's own, deleted after it.
	Namespace string
	// AgentImage holds this tree's static exechost at /exechost.
	AgentImage string
	// Client is an admin client.
	Client *kubeapi.Client
}

// Config returns a kubernetes sandbox config for env: its namespace, the
// busybox image, the agent image, nothing pulled, small limits.
func (e *Env) Config() sandbox.Config {
	// Written as a user writes exechost.json: this package ranks below the
	// driver, whose registration decodes the section.
	raw, err := json.Marshal(map[string]any{
		"backend": "kubernetes",
		"kubernetes": map[string]any{
			"kubeconfig": e.Kubeconfig,
			"namespace":  e.Namespace,
			"image":      Image,
			"agentImage": e.AgentImage,
			"pullPolicy": "Never",
			"memory":     "256m",
			"cpus":       0.5,
		},
	})
	if err != nil {
		panic(err)
	}
	var cfg sandbox.Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		panic(err)
	}
	return cfg
}

// shared is what every test of a process shares, set up once.
var shared struct {
	once       sync.Once
	skip       string // why there is no cluster
	err        error
	kubeconfig string
	cs         *kubeapi.Client
	agentImage string
}

// Cluster returns the test cluster with a fresh namespace for t (deleted
// when t ends), or skips loudly (fails under CI=true) when none runs.
func Cluster(t testing.TB) *Env {
	t.Helper()
	c := &shared
	c.once.Do(func() {
		kc := filepath.Join(Dir(), "admin.kubeconfig")
		if _, err := os.Stat(kc); err != nil {
			c.skip = "no cluster state at " + Dir() + " (hint: scripts/provision-kubernetes.sh up, as root)"
			return
		}
		rc, err := kubeapi.Load(kc, "")
		if err != nil {
			c.err = err
			return
		}
		cs, err := kubeapi.New(rc)
		if err != nil {
			c.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cs.Do(ctx, http.MethodGet, "/api/v1/nodes", nil, nil, nil); err != nil {
			c.skip = fmt.Sprintf("the cluster at %s does not answer: %v (hint: scripts/provision-kubernetes.sh up)", rc.Host, err)
			return
		}
		c.kubeconfig, c.cs = kc, cs
		c.agentImage, c.err = importAgentImage(t)
	})
	if c.skip != "" {
		testdep.Missing(t, "a Kubernetes test cluster", c.skip)
	}
	if c.err != nil {
		t.Fatalf("test cluster: %v", c.err)
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	ns := "exechost-test-" + hex.EncodeToString(r[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.cs.Do(ctx, http.MethodPost, "/api/v1/namespaces", nil, &kubeapi.Namespace{APIVersion: "v1", Kind: "Namespace", ObjectMeta: kubeapi.ObjectMeta{Name: ns}}, nil); err != nil {
		t.Fatalf("create test namespace: %v", err)
	}
	t.Cleanup(func() {
		// Deleting the namespace deletes whatever a failed test left.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.cs.Do(ctx, http.MethodDelete, "/api/v1/namespaces/"+ns, nil, nil, nil)
	})
	return &Env{Kubeconfig: c.kubeconfig, Namespace: ns, AgentImage: c.agentImage, Client: c.cs}
}

// importAgentImage puts a static build of exechost at /exechost in an
// image of its own (nothing else in it) and imports it into the cluster's
// containerd, named by the binary's hash.
func importAgentImage(t testing.TB) (string, error) {
	bin := dockertest.AgentBinary(t)
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	ref := "exechost.test/agent:" + hex.EncodeToString(sum[:8])
	root, err := os.MkdirTemp("", "exechost-agent-image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(root)
	if err := os.WriteFile(filepath.Join(root, "exechost"), data, 0o555); err != nil {
		return "", err
	}
	cmd := exec.Command(script(), "image", ref, root, `["/exechost"]`)
	cmd.Env = append(os.Environ(), "EXECHOST_K8S_DIR="+Dir())
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("import the agent image: %v\n%s", err, out)
	}
	return ref, nil
}

// script is scripts/provision-kubernetes.sh of this tree.
func script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "scripts", "provision-kubernetes.sh")
}

// UserKubeconfig writes a kubeconfig for the test cluster, pointed at
// server (empty: the cluster's), whose client certificate — signed by the
// cluster's CA — names user, who has no role unless a test binds one.
func UserKubeconfig(t testing.TB, user, server string) string {
	t.Helper()
	pki := filepath.Join(Dir(), "pki")
	caPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := tls.LoadX509KeyPair(filepath.Join(pki, "ca.crt"), filepath.Join(pki, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: user},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, ca.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	host := server
	if host == "" {
		base, err := kubeapi.Load(filepath.Join(Dir(), "admin.kubeconfig"), "")
		if err != nil {
			t.Fatal(err)
		}
		host = base.Host
	}
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	// JSON is YAML: the kubeconfig a user would have, with inline data.
	kc, err := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Config", "current-context": "test",
		"clusters": []any{map[string]any{"name": "test", "cluster": map[string]any{"server": host, "certificate-authority-data": b64(caPEM)}}},
		"users": []any{map[string]any{"name": user, "user": map[string]any{
			"client-certificate-data": b64(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
			"client-key-data":         b64(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})),
		}}},
		"contexts": []any{map[string]any{"name": "test", "context": map[string]any{"cluster": "test", "user": user}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
