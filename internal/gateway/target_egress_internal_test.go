package gateway

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/sandbox"
)

// keptBackend is a sandbox backend that runs nothing and keeps each
// request it is given; as a holder it claims to hold egress lists.
type keptBackend struct {
	mu   sync.Mutex
	reqs []sandbox.Request
}

func (b *keptBackend) Name() string { return "kept" }

func (b *keptBackend) Exec(_ context.Context, req sandbox.Request) (runner.Result, error) {
	b.mu.Lock()
	b.reqs = append(b.reqs, req)
	b.mu.Unlock()
	return runner.Result{Success: true}, nil
}

func (b *keptBackend) Close(context.Context) error { return nil }

func (b *keptBackend) taken() []sandbox.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]sandbox.Request(nil), b.reqs...)
}

type holdingBackend struct{ keptBackend }

func (*holdingBackend) HoldsEgress() error { return nil }

// TestSandboxEgressListHeldOrRefused: an agent whose policy on the
// gateway lists egress names gets a lease on the engine's proxy in its
// sandbox request (the proxy variables with its run id) from a backend
// that holds a list, and is refused, before anything runs, by one that
// does not; without the list the same backend runs it (the control).
func TestSandboxEgressListHeldOrRefused(t *testing.T) {
	dir := t.TempDir()
	store := approvals.NewStore(dir)
	setList := func(list []string) {
		t.Helper()
		if _, err := store.Update(func(f *approvals.File) error {
			f.Defaults.Confine = nil
			if list != nil {
				f.Defaults.Confine = &approvals.Confine{Egress: list}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	setList([]string{"example.com:443"})
	eng := host.NewEngine(dir, policy.HostGateway, "gw")
	t.Cleanup(func() { _ = eng.Close() })
	exec := func(sb sandbox.Backend) (bridge.ExecResult, error) {
		g, err := New(Options{StateDir: t.TempDir(), Sandbox: sb, Executor: eng})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		return g.Exec(context.Background(), bridge.ExecParams{Command: "echo hi", Host: "sandbox", AgentID: "a", SessionKey: "s"})
	}

	plain := &keptBackend{}
	_, err := exec(plain)
	if be := bridge.AsError(err); be.Code != bridge.CodeUnavailable || !strings.Contains(be.Message, "cannot hold an egress list") {
		t.Fatalf("a backend without EgressHolder: %v; want UNAVAILABLE naming the list", err)
	}
	if n := len(plain.taken()); n != 0 {
		t.Fatalf("the refused run reached the backend %d times", n)
	}

	holder := &holdingBackend{}
	res, err := exec(holder)
	if err != nil {
		t.Fatalf("a holder: %v", err)
	}
	reqs := holder.taken()
	if len(reqs) != 1 || reqs[0].Egress == nil {
		t.Fatalf("requests %+v: want one with the lease", reqs)
	}
	eg := reqs[0].Egress
	if u := eg.Env["HTTPS_PROXY"]; !strings.HasPrefix(u, "http://"+res.RunID+":") || !strings.HasSuffix(u, "@"+sandbox.EgressAddr) || eg.Serve == nil ||
		len(eg.Patterns) != 1 || eg.Patterns[0] != "example.com:443" {
		t.Errorf("lease %+v: want the run's credentials for %s, the list and the proxy", eg, sandbox.EgressAddr)
	}

	setList(nil)
	if _, err := exec(plain); err != nil {
		t.Fatalf("control without a list: %v", err)
	}
	if reqs := plain.taken(); len(reqs) != 1 || reqs[0].Egress != nil {
		t.Errorf("control requests %+v: want one without a lease", reqs)
	}
}
