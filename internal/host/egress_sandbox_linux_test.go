package host

import (
	"context"
	"errors"
	"fmt"
	"github.com/exechost/exechost/internal/egress/egresstest"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/bwrap"
	"github.com/exechost/exechost/internal/sandbox/docker"
	"github.com/exechost/exechost/internal/sandbox/docker/dockertest"
	"github.com/exechost/exechost/internal/testdep"
)

// sandboxEgressFixture is an engine (its policy, proxy, prompter and
// audit log) and a Docker sandbox backend on the busybox test image, run
// together as the gateway's sandbox target runs them
// (internal/gateway/target_sandbox.go).
type sandboxEgressFixture struct {
	*fixture
	backend sandbox.Backend
	port    string
	runs    atomic.Int64
}

func newSandboxEgressFixture(t testing.TB, open func(t testing.TB) sandbox.Backend, egressList ...string) *sandboxEgressFixture {
	t.Helper()
	b := open(t)
	f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny)
	// A listener on every address: the control container (network
	// bridge) reaches it on the bridge's address, the proxy on loopback.
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from "+r.Host)
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	loop := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	f.engine.egr.resolver = egresstest.Resolver{"example.com": loop, "other.test": loop}
	if egressList != nil {
		var list []string
		for _, s := range egressList {
			list = append(list, strings.ReplaceAll(s, "$PORT", port))
		}
		if _, err := f.store.Update(func(file *approvals.File) error {
			file.Defaults.Confine = &approvals.Confine{Egress: list}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return &sandboxEgressFixture{fixture: f, backend: b, port: port}
}

// dockerBackend opens the Docker backend on the busybox test image with
// network as sandbox.docker.network.
func dockerBackend(network string) func(t testing.TB) sandbox.Backend {
	return func(t testing.TB) sandbox.Backend {
		t.Helper()
		cli := dockertest.Client(t)
		cfg := sandbox.DefaultConfig()
		cfg = docker.With(cfg, func(x *docker.Config) { x.Image, x.Network = dockertest.BuildImage(t, cli), network })
		cfg.IdleTimeout = sandbox.Duration(time.Hour)
		cfg.AgentBinary = dockertest.AgentBinary(t)
		b, err := docker.Open(context.Background(), cfg, t.TempDir())
		if err != nil {
			t.Fatalf("docker.Open: %v", err)
		}
		t.Cleanup(func() {
			if err := b.Close(context.Background()); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return b
	}
}

// bwrapBackend opens the bwrap backend with its resident agent.
func bwrapBackend(t testing.TB) sandbox.Backend {
	t.Helper()
	testdep.Bwrap(t, true)
	b, err := bwrap.Open(context.Background(), sandbox.DefaultConfig(), t.TempDir())
	if err != nil {
		t.Fatalf("bwrap.Open: %v", err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	if b.AgentErr() != nil {
		t.Skipf("no resident agent here: %v", b.AgentErr())
	}
	return b
}

// dockerBridge is the host's address on Docker's default bridge, where a
// container with a network reaches the host's listeners.
func dockerBridge(t testing.TB) string {
	t.Helper()
	ifc, err := net.InterfaceByName("docker0")
	if err != nil {
		t.Fatalf("docker's bridge: %v", err)
	}
	addrs, _ := ifc.Addrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Fatal("docker0 has no IPv4 address")
	return ""
}

// run runs shell text in the sandbox as the gateway does: the engine's
// lease for the agent's egress list, the backend's check, the run, the
// lease's end.
func (f *sandboxEgressFixture) run(t testing.TB, ask policy.Ask, cmd string) (runner.Result, error) {
	t.Helper()
	return f.runAs(t, "main", ask, cmd)
}

// runAs is run as agent.
func (f *sandboxEgressFixture) runAs(t testing.TB, agent string, ask policy.Ask, cmd string) (runner.Result, error) {
	t.Helper()
	id := fmt.Sprintf("sbrun%d", f.runs.Add(1))
	hreq := Request{Argv: []string{"/bin/sh", "-c", cmd}, RawCommand: cmd, AgentID: agent, SessionKey: "s1", RunID: id, Security: policy.SecurityAllowlist, Ask: ask}
	req := sandbox.Request{AgentID: agent, SessionKey: "s1", Command: cmd, Timeout: 5 * time.Minute}
	eg, end, err := f.engine.SandboxEgress(hreq, f.backend.Name())
	if err != nil {
		return runner.Result{}, err
	}
	defer end()
	req.Egress = eg
	if err := sandbox.CheckEgress(f.backend, req); err != nil {
		return runner.Result{}, err
	}
	return f.backend.Exec(context.Background(), req)
}

func (f *sandboxEgressFixture) mustRun(t testing.TB, ask policy.Ask, cmd string) runner.Result {
	t.Helper()
	res, err := f.run(t, ask, cmd)
	if err != nil {
		t.Fatalf("%q: %v", cmd, err)
	}
	return res
}

// waitRecord waits for an egress record that ok accepts.
func (f *sandboxEgressFixture) waitRecord(t *testing.T, what string, ok func(audit.Record) bool) audit.Record {
	t.Helper()
	ef := &egressFixture{fixture: f.fixture}
	return ef.waitRecord(t, what, ok)
}

// direct is shell text that tries the host's listener at addr without
// the proxy: busybox nc speaking HTTP.
func direct(addr, port string) string {
	return `printf 'GET / HTTP/1.0\r\nHost: direct\r\n\r\n' | timeout 5 nc ` + addr + " " + port
}

// TestEgressInDockerSandbox: a Docker sandbox run whose policy lists
// example.com reaches it by name through the engine's proxy (busybox wget
// with the run's http_proxy), with its bytes on the audit record under
// the run's id and agent; a name on no pattern is refused and recorded;
// a direct TCP connection to the host's listener and a DNS query to the
// host fail (the container has network none), while the control, the
// same sandbox with Docker's bridge network and no list, reaches both.
func TestEgressInDockerSandbox(t *testing.T) {
	f := newSandboxEgressFixture(t, dockerBackend("bridge"), "example.com:$PORT/private")
	bridge := dockerBridge(t)
	res := f.mustRun(t, policy.AskOff, "wget -q -O - http://example.com:"+f.port+"/")
	if res.ExitCode != 0 || res.Stdout != "hello from example.com:"+f.port {
		t.Fatalf("wget to a listed name through the proxy: %+v", res)
	}
	rec := f.waitRecord(t, "for example.com", func(r audit.Record) bool {
		return r.Egress != nil && r.Egress.Target == "example.com:"+f.port && r.Decision == audit.DecisionAllow
	})
	if rec.Egress.Rule != "example.com:"+f.port+"/private" || rec.Egress.Up < 50 || rec.Egress.Down < 50 || !strings.HasPrefix(rec.RunID, "sbrun") || rec.AgentID != "main" || rec.Egress.Method != http.MethodGet {
		t.Errorf("record %+v %+v: want the rule, bytes each way, run and agent", rec, *rec.Egress)
	}
	// The proxy variables carry the run's own credentials.
	if res := f.mustRun(t, policy.AskOff, "echo $https_proxy"); !strings.HasPrefix(res.Stdout, "http://sbrun") || !strings.Contains(res.Stdout, "@"+sandbox.EgressAddr) {
		t.Errorf("https_proxy in the sandbox = %q", res.Stdout)
	}

	res = f.mustRun(t, policy.AskOff, "wget -q -O - http://other.test:"+f.port+"/")
	if res.ExitCode == 0 || strings.Contains(res.Stdout, "hello") {
		t.Fatalf("wget to a name on no pattern reached it: %+v", res)
	}
	rec = f.waitRecord(t, "refusing other.test", func(r audit.Record) bool {
		return r.Egress != nil && r.Egress.Target == "other.test:"+f.port
	})
	if rec.Decision != audit.DecisionDeny || !strings.Contains(rec.Reason, "on no egress pattern") {
		t.Errorf("refusal record %+v", rec)
	}

	// What skips the proxy: TCP straight to the host's listener, and a
	// DNS query to a resolver on the host.
	dns := newUDPCatcher(t, bridge)
	if res := f.mustRun(t, policy.AskOff, direct(bridge, f.port)); strings.Contains(res.Stdout, "hello") {
		t.Fatalf("a direct TCP connection from the egress sandbox reached the host: %+v", res)
	}
	if res := f.mustRun(t, policy.AskOff, "timeout 5 nslookup example.com "+dns.addr); res.ExitCode == 0 {
		t.Errorf("nslookup in the egress sandbox succeeded: %+v", res)
	}
	if res := f.mustRun(t, policy.AskOff, "wget -q -O - -Y off http://example.com:"+f.port+"/"); res.ExitCode == 0 {
		t.Errorf("wget without the proxy resolved and reached example.com: %+v", res)
	}
	if n := dns.count(); n != 0 {
		t.Errorf("the host's resolver address got %d packets from the egress sandbox", n)
	}
	if res := f.mustRun(t, policy.AskOff, "cat /proc/net/dev"); strings.Contains(res.Stdout, "eth0") {
		t.Errorf("the egress sandbox has an interface beyond loopback:\n%s", res.Stdout)
	}

	// The control: the same backend (network bridge) for a run whose
	// policy has no list reaches the listener and the resolver address.
	if _, err := f.store.Update(func(file *approvals.File) error {
		file.Defaults.Confine = nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if res := f.mustRun(t, policy.AskOff, direct(bridge, f.port)); !strings.Contains(res.Stdout, "hello from direct") {
		t.Fatalf("control: the sandbox with Docker's bridge did not reach the host's listener: %+v", res)
	}
	_ = f.mustRun(t, policy.AskOff, "timeout 5 nslookup example.com "+dns.addr)
	if dns.wait(5*time.Second) == 0 {
		t.Errorf("control: no DNS packet from the sandbox with Docker's bridge reached the host")
	}
}

// TestEgressInDockerSandboxAsks: under ask, a name on no pattern is put to
// the engine's prompter with the sandbox's reach; allow-once lets that
// connection through and deny refuses it, each answer on the record.
func TestEgressInDockerSandboxAsks(t *testing.T) {
	f := newSandboxEgressFixture(t, dockerBackend("none"), "example.com:$PORT/private")
	pr := &egressPrompter{answer: policy.AllowOnce}
	f.engine.Prompter = pr
	// An IP literal is what an approval can open to a loopback address.
	target := "127.0.0.1:" + f.port
	res := f.mustRun(t, policy.AskOnMiss, "wget -q -O - http://"+target+"/")
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "hello from "+target) {
		t.Fatalf("allow-once: %+v", res)
	}
	pr.mu.Lock()
	asked := append([]prompt.Request(nil), pr.asked...)
	pr.answer = policy.Reject
	pr.mu.Unlock()
	if len(asked) != 1 || !strings.Contains(asked[0].Command, "wants "+target) || !strings.HasPrefix(asked[0].Confinement, "host=sandbox (docker): network: none but egress by name") {
		t.Fatalf("prompts %+v: want one naming the target and the sandbox's reach", asked)
	}
	f.waitRecord(t, "of the allow-once answer", func(r audit.Record) bool {
		return r.Egress != nil && r.Approval == string(policy.AllowOnce) && r.Decision == audit.DecisionAllow
	})
	if res := f.mustRun(t, policy.AskOnMiss, "wget -q -O - http://"+target+"/"); res.ExitCode == 0 {
		t.Fatalf("deny let the connection through: %+v", res)
	}
	f.waitRecord(t, "of the deny answer", func(r audit.Record) bool {
		return r.Egress != nil && r.Approval == string(policy.Reject) && r.Decision == audit.DecisionDeny
	})
}

// TestEgressSandboxKeepsPoliciesApart: a run with the list and one
// without, of one agent and session, never share a container (its
// network is fixed when it starts); the one without keeps Docker's
// configured network.
func TestEgressSandboxKeepsPoliciesApart(t *testing.T) {
	f := newSandboxEgressFixture(t, dockerBackend("bridge"), "example.com:$PORT/private")
	f.mustRun(t, policy.AskOff, "true")
	if _, err := f.store.Update(func(file *approvals.File) error {
		file.Defaults.Confine = nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if res := f.mustRun(t, policy.AskOff, "cat /proc/net/dev"); !strings.Contains(res.Stdout, "eth0") {
		t.Errorf("the run without a list got the egress container:\n%s", res.Stdout)
	}
	ids, err := f.backend.(*docker.Backend).RemoveOrphans(context.Background())
	if err != nil || ids != 0 {
		t.Errorf("RemoveOrphans = %d, %v: both containers are in use", ids, err)
	}
}

// TestEgressSandboxRefusedWithoutAgent: a backend whose commands do not go
// through the resident agent cannot run the relay, so a run with a list
// is refused, never run with the container's network.
func TestEgressSandboxRefusedWithoutAgent(t *testing.T) {
	cli := dockertest.Client(t)
	cfg := sandbox.DefaultConfig()
	cfg = docker.With(cfg, func(x *docker.Config) { x.Image, x.Network = dockertest.BuildImage(t, cli), "bridge" })
	cfg.Agent = sandbox.AgentOff
	b, err := docker.Open(context.Background(), cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	req := sandbox.Request{AgentID: "main", SessionKey: "s1", Command: "true", Egress: &sandbox.Egress{Key: "k", Serve: func(ln net.Listener) error { return ln.Close() }}}
	if err := sandbox.CheckEgress(b, req); !errors.Is(err, sandbox.ErrNoEgress) || !strings.Contains(err.Error(), "resident agent") {
		t.Errorf("CheckEgress without the agent = %v", err)
	}
	if _, err := b.Exec(context.Background(), req); !errors.Is(err, sandbox.ErrNoEgress) {
		t.Errorf("Exec without the agent = %v, want ErrNoEgress", err)
	}
	// The control: without the list the same backend runs it.
	req.Egress = nil
	if res, err := b.Exec(context.Background(), req); err != nil || res.ExitCode != 0 {
		t.Errorf("control: %+v, %v", res, err)
	}
}

// udpCatcher counts datagrams sent to its address (a resolver's, to
// busybox nslookup, which takes SERVER:PORT).
type udpCatcher struct {
	n    atomic.Int64
	conn net.PacketConn
	addr string
}

func newUDPCatcher(t *testing.T, addr string) *udpCatcher {
	t.Helper()
	pc, err := net.ListenPacket("udp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatalf("a resolver address on the host: %v", err)
	}
	c := &udpCatcher{conn: pc, addr: pc.LocalAddr().String()}
	go func() {
		buf := make([]byte, 1500)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			c.n.Add(1)
		}
	}()
	t.Cleanup(func() { pc.Close() })
	return c
}

func (c *udpCatcher) count() int64 { return c.n.Load() }

// wait waits up to d for a datagram and returns the count.
func (c *udpCatcher) wait(d time.Duration) int64 {
	deadline := time.Now().Add(d)
	for c.n.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	return c.n.Load()
}

// TestEgressInBwrapSandboxThroughEngine: the engine's lease holds in the
// bwrap sandbox as in Docker's: a listed name is reached through the
// relay and on the audit log with its bytes, run and agent; under ask a
// name on no pattern is put to the prompter with the sandbox's reach and
// allow-once lets it through, while a direct connection fails.
func TestEgressInBwrapSandboxThroughEngine(t *testing.T) {
	f := newSandboxEgressFixture(t, bwrapBackend, "example.com:$PORT/private")
	res := f.mustRun(t, policy.AskOff, "curl -fsS http://example.com:"+f.port+"/")
	if res.ExitCode != 0 || res.Stdout != "hello from example.com:"+f.port {
		t.Fatalf("curl to a listed name through the bwrap relay: %+v", res)
	}
	rec := f.waitRecord(t, "for example.com", func(r audit.Record) bool {
		return r.Egress != nil && r.Egress.Target == "example.com:"+f.port && r.Decision == audit.DecisionAllow
	})
	if rec.Egress.Up < 50 || rec.Egress.Down < 50 || !strings.HasPrefix(rec.RunID, "sbrun") || rec.AgentID != "main" {
		t.Errorf("record %+v %+v: want bytes each way, run and agent", rec, *rec.Egress)
	}
	pr := &egressPrompter{answer: policy.AllowOnce}
	f.engine.Prompter = pr
	target := "127.0.0.1:" + f.port
	res = f.mustRun(t, policy.AskOnMiss, "curl -fsS http://"+target+"/")
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "hello from "+target) {
		t.Fatalf("allow-once: %+v", res)
	}
	pr.mu.Lock()
	asked := append([]prompt.Request(nil), pr.asked...)
	pr.mu.Unlock()
	if len(asked) != 1 || !strings.HasPrefix(asked[0].Confinement, "host=sandbox (bwrap): network: none but egress by name") {
		t.Errorf("prompts %+v: want one with the bwrap sandbox's reach", asked)
	}
	if res := f.mustRun(t, policy.AskOff, "curl -fsS --noproxy '*' -m 5 http://"+target+"/"); res.ExitCode == 0 {
		t.Errorf("a direct connection from the bwrap egress sandbox: %+v", res)
	}
}
