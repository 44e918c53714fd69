package kubernetes

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/kubernetes/kubeapi"
	"github.com/exechost/exechost/internal/sandbox/kubernetes/kubetest"
)

func run(t *testing.T, b *Backend, req sandbox.Request) runner.Result {
	t.Helper()
	if req.AgentID == "" {
		req.AgentID = "main"
	}
	if req.SessionKey == "" {
		req.SessionKey = "s1"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := b.Exec(ctx, req)
	if err != nil {
		t.Fatalf("Exec(%q %q): %v", req.Argv, req.Command, err)
	}
	return res
}

// TestExec runs commands in a real pod: output, exit codes, environment,
// working directory, and what the hardening means from inside.
func TestExec(t *testing.T) {
	b, _ := open(t, nil)
	tests := []struct {
		name string
		req  sandbox.Request
		code int
		out  string
		errs string
	}{
		{"argv", sandbox.Request{Argv: []string{"echo", "hello", "pod"}}, 0, "hello pod\n", ""},
		{"shell", sandbox.Request{Command: "echo out; echo err >&2; exit 3"}, 3, "out\n", "err\n"},
		{"env", sandbox.Request{Command: "echo $GREETING", Env: map[string]string{"GREETING": "hi"}}, 0, "hi\n", ""},
		{"cwd is the workspace", sandbox.Request{Argv: []string{"pwd"}}, 0, "/workspace\n", ""},
		{"non-root", sandbox.Request{Command: "id -u; id -g"}, 0, "65534\n65534\n", ""},
		{"read-only root", sandbox.Request{Command: "touch /etc/x 2>/dev/null && echo writable || echo read-only"}, 0, "read-only\n", ""},
		{"writable tmp and workspace", sandbox.Request{Command: "touch /tmp/x /workspace/x && echo ok"}, 0, "ok\n", ""},
		{"no capabilities", sandbox.Request{Command: "grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status | awk '{print $2}' | sort -u"}, 0, "0000000000000000\n", ""},
		{"no new privileges", sandbox.Request{Command: "grep NoNewPrivs /proc/self/status | awk '{print $2}'"}, 0, "1\n", ""},
		{"no service-account token", sandbox.Request{Command: "ls /var/run/secrets/kubernetes.io 2>&1 >/dev/null | wc -l"}, 0, "1\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, b, tt.req)
			if res.ExitCode != tt.code || res.Stdout != tt.out || res.Stderr != tt.errs {
				t.Errorf("result = exit %d, stdout %q, stderr %q; want %d, %q, %q", res.ExitCode, res.Stdout, res.Stderr, tt.code, tt.out, tt.errs)
			}
		})
	}
	// Every command of the session ran in one pod, through one agent.
	if pods := ownedPods(t, b); len(pods) != 1 {
		t.Errorf("pods = %d, want 1 for one session", len(pods))
	}
	if res := run(t, b, sandbox.Request{SessionKey: "s2", Argv: []string{"true"}}); res.ExitCode != 0 {
		t.Errorf("second session: %+v", res)
	}
	if pods := ownedPods(t, b); len(pods) != 2 {
		t.Errorf("pods = %d, want 2 for two sessions", len(pods))
	}
}

// TestHardenedPod checks the pod and NetworkPolicy objects as the API
// server stored them.
func TestHardenedPod(t *testing.T) {
	b, _ := open(t, nil)
	run(t, b, sandbox.Request{Argv: []string{"true"}})
	pods := ownedPods(t, b)
	if len(pods) != 1 {
		t.Fatalf("pods = %d, want 1", len(pods))
	}
	p := pods[0]
	if p.Labels[LabelSandbox] != "1" || p.Labels[LabelOwner] != b.owner || p.Labels[LabelAgent] != "main" || p.Labels[LabelScope] == "" {
		t.Errorf("labels = %v", p.Labels)
	}
	if p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken {
		t.Error("the service-account token is mounted")
	}
	for _, c := range append(append([]kubeapi.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		s := c.SecurityContext
		switch {
		case s == nil:
			t.Fatalf("container %s has no security context", c.Name)
		case s.RunAsNonRoot == nil || !*s.RunAsNonRoot, s.RunAsUser == nil || *s.RunAsUser == 0:
			t.Errorf("container %s may run as root", c.Name)
		case s.ReadOnlyRootFilesystem == nil || !*s.ReadOnlyRootFilesystem:
			t.Errorf("container %s has a writable root", c.Name)
		case s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation:
			t.Errorf("container %s allows privilege escalation", c.Name)
		case s.Capabilities == nil || len(s.Capabilities.Drop) != 1 || s.Capabilities.Drop[0] != "ALL":
			t.Errorf("container %s keeps capabilities", c.Name)
		case s.SeccompProfile == nil || s.SeccompProfile.Type != "RuntimeDefault":
			t.Errorf("container %s has no RuntimeDefault seccomp", c.Name)
		}
		if l := c.Resources.Limits; l["memory"] == "" || l["memory"] == "0" || l["cpu"] == "" || l["cpu"] == "0" {
			t.Errorf("container %s has no limits: %v", c.Name, c.Resources.Limits)
		}
	}
	np, err := clientOf(t, b).getPolicy(context.Background(), b.k.Namespace, b.policyName())
	if err != nil {
		t.Fatal(err)
	}
	if len(np.Spec.PolicyTypes) != 2 || len(np.Spec.Egress) != 0 || len(np.Spec.Ingress) != 0 || np.Spec.PodSelector.MatchLabels[LabelOwner] != b.owner {
		t.Errorf("network policy = %+v, want all ingress and egress denied for the owner's pods", np.Spec)
	}
}

func TestOutputCap(t *testing.T) {
	b, _ := open(t, nil)
	res := run(t, b, sandbox.Request{Command: "head -c 3000000 /dev/zero | tr '\\0' a"})
	if !res.Truncated || !strings.HasSuffix(res.Stdout, runner.TruncatedSuffix) || res.ExitCode != 0 {
		t.Errorf("3 MB flood: truncated %v, exit %d, stdout ends …%q", res.Truncated, res.ExitCode, res.Stdout[max(0, len(res.Stdout)-30):])
	}
	if max := runner.MaxOutput + len(runner.TruncatedSuffix) + 1; len(res.Stdout)+len(res.Stderr) > max {
		t.Errorf("kept %d bytes, cap is %d", len(res.Stdout)+len(res.Stderr), runner.MaxOutput)
	}
}

// TestTimeoutKillsTheProcessTree: a timed-out command and its children
// die in the pod; the pod and its agent stay.
func TestTimeoutKillsTheProcessTree(t *testing.T) {
	b, _ := open(t, nil)
	res := run(t, b, sandbox.Request{Command: "sleep 301 & sleep 302; wait", Timeout: 2 * time.Second})
	if !res.TimedOut || res.Success {
		t.Fatalf("result = %+v, want timed out", res)
	}
	waitFor(t, "the command's processes to die", func() bool {
		ps := run(t, b, sandbox.Request{Argv: []string{"ps", "-o", "args"}}).Stdout
		return !strings.Contains(ps, "sleep 301") && !strings.Contains(ps, "sleep 302")
	})
	if pods := ownedPods(t, b); len(pods) != 1 {
		t.Errorf("pods = %d after a timeout, want the one pod kept", len(pods))
	}
}

// TestPodLossMidRun: a pod deleted while a command runs is a clear error
// at once, not a hang; the next command gets a new pod.
func TestPodLossMidRun(t *testing.T) {
	b, _ := open(t, nil)
	run(t, b, sandbox.Request{Argv: []string{"true"}})
	pods := ownedPods(t, b)
	if len(pods) != 1 {
		t.Fatalf("pods = %d, want 1", len(pods))
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.Exec(context.Background(), sandbox.Request{AgentID: "main", SessionKey: "s1", Command: "touch /tmp/started; sleep 600"})
		done <- err
	}()
	waitFor(t, "the command to start", func() bool {
		return run(t, b, sandbox.Request{Command: "test -e /tmp/started && echo yes"}).Stdout == "yes\n"
	})
	if err := b.deletePod(context.Background(), pods[0].Name); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrPodLost) {
			t.Errorf("Exec whose pod was deleted: %v, want ErrPodLost", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("Exec still running two minutes after its pod was deleted")
	}
	if res := run(t, b, sandbox.Request{Argv: []string{"echo", "again"}}); res.Stdout != "again\n" {
		t.Errorf("exec after the pod was lost: %+v", res)
	}
}

// TestGatewayRestart: a gateway that starts over the same state directory
// deletes the pods its predecessor left (their agents cannot be adopted).
func TestGatewayRestart(t *testing.T) {
	first, dir := open(t, nil)
	run(t, first, sandbox.Request{Argv: []string{"true"}})
	if n := len(ownedPods(t, first)); n != 1 {
		t.Fatalf("pods = %d, want 1", n)
	}
	// The first backend is not closed: it "crashed".
	second, err := Open(context.Background(), testConfig(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close(context.Background())
	if second.owner != first.owner {
		t.Fatalf("owners differ: %s, %s", first.owner, second.owner)
	}
	if n := len(ownedPods(t, second)); n != 0 {
		t.Errorf("pods after the restart = %d, want the orphan deleted", n)
	}
	if res := run(t, second, sandbox.Request{Argv: []string{"echo", "fresh"}}); res.Stdout != "fresh\n" {
		t.Errorf("exec after restart: %+v", res)
	}
}

// TestWarmPool: a new session's first command takes a ready pod from the
// pool, which then refills; Close deletes everything.
func TestWarmPool(t *testing.T) {
	b, _ := open(t, func(c *sandbox.Config) { *c = With(*c, func(k *Config) { k.PoolSize = 1 }) })
	waitFor(t, "the warm pool to fill", func() bool { return b.PoolReady() == 1 })
	warm := b.pool.names()[0]
	start := time.Now()
	run(t, b, sandbox.Request{SessionKey: "new", Argv: []string{"true"}})
	took := time.Since(start)
	if got := b.boxes.Handles(); len(got) != 1 || got[0] != warm {
		t.Fatalf("the session's pod = %v, want the warm pod %s", got, warm)
	}
	t.Logf("first command from the warm pool: %s", took)
	waitFor(t, "the pool to refill", func() bool { return b.PoolReady() == 1 })
	waitFor(t, "the claimed pod's labels", func() bool {
		p, err := clientOf(t, b).getPod(context.Background(), b.k.Namespace, warm)
		return err == nil && p.Labels[LabelScope] != poolScope && p.Labels[LabelAgent] == "main"
	})
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(ownedPods(t, b)); n != 0 {
		t.Errorf("pods after Close = %d, want 0", n)
	}
	if _, err := clientOf(t, b).getPolicy(context.Background(), b.k.Namespace, b.policyName()); !kubeapi.IsNotFound(err) {
		t.Errorf("network policy after Close: %v, want it deleted", err)
	}
	if _, err := b.Exec(context.Background(), sandbox.Request{AgentID: "main", Argv: []string{"true"}}); !errors.Is(err, ErrClosed) {
		t.Errorf("Exec after Close: %v, want ErrClosed", err)
	}
}

func TestIdleReap(t *testing.T) {
	b, _ := open(t, nil)
	run(t, b, sandbox.Request{Argv: []string{"true"}})
	ctx := context.Background()
	if n := b.reapIdle(ctx, time.Now()); n != 0 {
		t.Fatalf("reaped %d fresh pods", n)
	}
	if n := b.reapIdle(ctx, time.Now().Add(2*time.Duration(b.cfg.IdleTimeout))); n != 1 {
		t.Fatalf("reaped %d idle pods, want 1", n)
	}
	if n := len(ownedPods(t, b)); n != 0 {
		t.Errorf("pods after the reap = %d, want 0", n)
	}
}

// TestForbidden: credentials without the Role are refused at Open, saying
// what is missing.
func TestForbidden(t *testing.T) {
	cfg := testConfig(t)
	cfg = With(cfg, func(k *Config) { k.Kubeconfig = kubetest.UserKubeconfig(t, "exechost-nobody", "") })
	_, err := Open(context.Background(), cfg, t.TempDir())
	if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "create pods") || !strings.Contains(err.Error(), "docs/sandbox.md") {
		t.Errorf("Open without permissions: %v, want ErrForbidden naming the verbs and the Role", err)
	}
}

func TestUnreachable(t *testing.T) {
	cfg := testConfig(t)
	// Valid credentials, pointed at a port nobody listens on.
	cfg = With(cfg, func(k *Config) { k.Kubeconfig = kubetest.UserKubeconfig(t, "admin", "https://127.0.0.1:1") })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Open(ctx, cfg, t.TempDir())
	if !errors.Is(err, ErrUnreachable) {
		t.Errorf("Open with no API server: %v, want ErrUnreachable", err)
	}
}

// TestBadImage: a pod that cannot start is a clear error, at once.
func TestBadImage(t *testing.T) {
	b, _ := open(t, func(c *sandbox.Config) { *c = With(*c, func(k *Config) { k.Image = "exechost.test/no-such-image:1" }) })
	_, err := b.Exec(context.Background(), sandbox.Request{AgentID: "main", Argv: []string{"true"}})
	if !errors.Is(err, ErrPodStart) || !strings.Contains(err.Error(), "ErrImageNeverPull") {
		t.Errorf("Exec with a missing image: %v, want ErrPodStart naming ErrImageNeverPull", err)
	}
	if n := len(ownedPods(t, b)); n != 0 {
		t.Errorf("pods after a failed start = %d, want 0", n)
	}
}
