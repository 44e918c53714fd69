package kubernetes

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/docker/dockertest"
	"github.com/exechost/exechost/internal/testdep"
)

// The tests run against the real single-node cluster that
// scripts/provision-kubernetes.sh brings up (scripts/test.sh does, as
// root): its state directory holds the admin kubeconfig and the CA, and
// its containerd has the busybox image; the agent image is made here from
// a static build of this tree and imported with the same script.

// testImage is the busybox image the script imports.
const testImage = "exechost.test/busybox:1"

// clusterDir is the running cluster's state directory.
func clusterDir() string {
	if d := os.Getenv("EXECHOST_K8S_DIR"); d != "" {
		return d
	}
	return "/tmp/exechost-k8s"
}

// testCluster is what every test shares, set up once per test binary.
var testCluster struct {
	once       sync.Once
	skip       string // why there is no cluster
	err        error
	kubeconfig string
	cs         kubernetes.Interface
	namespace  string
	agentImage string
}

// cluster returns the shared cluster, a namespace of this test binary's
// own, and the agent image; it skips loudly (fails under CI=true) when no
// cluster runs.
func cluster(t *testing.T) (kubeconfig, namespace, agentImage string, cs kubernetes.Interface) {
	t.Helper()
	c := &testCluster
	c.once.Do(func() {
		kc := filepath.Join(clusterDir(), "admin.kubeconfig")
		if _, err := os.Stat(kc); err != nil {
			c.skip = "no cluster state at " + clusterDir() + " (hint: scripts/provision-kubernetes.sh up, as root)"
			return
		}
		rc, err := clientcmd.BuildConfigFromFlags("", kc)
		if err != nil {
			c.err = err
			return
		}
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			c.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
			c.skip = fmt.Sprintf("the cluster at %s does not answer: %v (hint: scripts/provision-kubernetes.sh up)", rc.Host, err)
			return
		}
		var r [4]byte
		_, _ = rand.Read(r[:])
		ns := "exechost-test-" + hex.EncodeToString(r[:])
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			c.err = err
			return
		}
		c.kubeconfig, c.cs, c.namespace = kc, cs, ns
		c.agentImage, c.err = importAgentImage(t)
	})
	if c.skip != "" {
		testdep.Missing(t, "a Kubernetes test cluster", c.skip)
	}
	if c.err != nil {
		t.Fatalf("test cluster: %v", c.err)
	}
	return c.kubeconfig, c.namespace, c.agentImage, c.cs
}

// importAgentImage puts a static build of exechost at /exechost in an
// image of its own (nothing else in it) and imports it into the cluster's
// containerd, named by the binary's hash.
func importAgentImage(t *testing.T) (string, error) {
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
	script, err := filepath.Abs("../../../scripts/provision-kubernetes.sh")
	if err != nil {
		return "", err
	}
	cmd := exec.Command(script, "image", ref, root, `["/exechost"]`)
	cmd.Env = append(os.Environ(), "EXECHOST_K8S_DIR="+clusterDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("import the agent image: %v\n%s", err, out)
	}
	return ref, nil
}

// TestMain deletes the test namespace (and so every pod a failed test
// left) after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if c := &testCluster; c.cs != nil && c.namespace != "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_ = c.cs.CoreV1().Namespaces().Delete(ctx, c.namespace, metav1.DeleteOptions{})
		cancel()
	}
	os.Exit(code)
}

// testConfig is a kubernetes sandbox config for the test cluster.
func testConfig(t *testing.T) sandbox.Config {
	kc, ns, img, _ := cluster(t)
	cfg := sandbox.Config{Backend: sandbox.BackendKubernetes}
	cfg.Kubernetes = sandbox.KubernetesConfig{
		Kubeconfig: kc,
		Namespace:  ns,
		Image:      testImage,
		AgentImage: img,
		PullPolicy: "Never",
		Memory:     "256m",
		CPUs:       0.5,
	}
	return cfg
}

// open opens a backend over the test cluster with its own state directory
// (so its own owner), closed at the end of the test.
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

// ownedPods lists the pods of b's owner.
func ownedPods(t *testing.T, b *Backend) []corev1.Pod {
	t.Helper()
	list, err := b.cs.CoreV1().Pods(b.k.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: b.ownerSelector()})
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

// waitFor polls cond (an API state, which has no event to wait on here)
// until it holds, failing after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after a minute waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// userKubeconfig writes a kubeconfig for the test cluster whose client
// certificate (signed by the cluster's CA) names user, who has no role.
func userKubeconfig(t *testing.T, user string) string {
	t.Helper()
	pki := filepath.Join(clusterDir(), "pki")
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
	kc, _, _, _ := cluster(t)
	base, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range base.AuthInfos {
		a.ClientCertificate, a.ClientKey = "", ""
		a.ClientCertificateData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		a.ClientKeyData = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	}
	for _, c := range base.Clusters {
		c.CertificateAuthority, c.CertificateAuthorityData = "", caPEM
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*base, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func loadKubeconfig(t *testing.T, path string) *clientcmdapi.Config {
	t.Helper()
	c, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writeKubeconfig(t *testing.T, c *clientcmdapi.Config, path string) {
	t.Helper()
	if err := clientcmd.WriteToFile(*c, path); err != nil {
		t.Fatal(err)
	}
}
