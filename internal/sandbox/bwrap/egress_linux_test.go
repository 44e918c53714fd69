package bwrap

import (
	"context"
	"errors"
	"fmt"
	"github.com/exechost/exechost/internal/egress/egresstest"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/egress"
	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/testdep"
)

// records keeps the proxy's records.
type records struct {
	mu   sync.Mutex
	recs []egress.Record
}

func (r *records) RecordEgress(rec egress.Record) {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
}

func (r *records) wait(t *testing.T, what string, ok func(egress.Record) bool) egress.Record {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		for _, rec := range r.recs {
			if ok(rec) {
				r.mu.Unlock()
				return rec
			}
		}
		r.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no record %s within 10s", what)
	return egress.Record{}
}

// hostAddr is an address of this machine beyond loopback, where a process
// with the host's network reaches a listener on every address.
func hostAddr(t *testing.T) string {
	t.Helper()
	ifs, _ := net.Interfaces()
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
				return n.IP.String()
			}
		}
	}
	t.Skip("no IPv4 address beyond loopback")
	return ""
}

// TestEgressInBwrapSandbox: a resident bwrap sandbox for a run with an
// egress lease reaches a listed name through the proxy (curl with the
// run's https_proxy; the proxy's record carries the run, agent and bytes),
// is refused a name on no pattern, and reaches nothing directly: TCP to
// the host's listener on loopback or on its own address fails, and so
// does a name look-up. The control: curl on the host, without the
// sandbox, reaches the same listener directly.
func TestEgressInBwrapSandbox(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		testdep.Missing(t, "curl", "the bwrap egress test runs it in the sandbox")
	}
	b, _ := open(t, nil)
	if b.AgentErr() != nil {
		t.Skipf("no resident agent here: %v", b.AgentErr())
	}
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from "+r.Host)
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	defer srv.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	recs := &records{}
	loop := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	px := egress.New(egress.WithResolver(egresstest.Resolver{"example.com": loop, "other.test": loop}), egress.WithRecorder(recs))
	defer px.Close()
	pat, err := egress.ParsePattern("example.com:" + port + "/private")
	if err != nil {
		t.Fatal(err)
	}
	lease, err := px.Register(egress.Run{ID: "bwrun1", Agent: "main", Command: "curl", Patterns: []egress.Pattern{pat}})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	u := lease.ProxyURLAt(sandbox.EgressAddr)
	eg := &sandbox.Egress{Key: "main list", Env: map[string]string{"http_proxy": u, "https_proxy": u, "HTTP_PROXY": u, "NO_PROXY": "", "no_proxy": ""},
		Serve: func(l net.Listener) error { return px.Serve(l) }}
	exe := func(cmd string) (string, int) {
		t.Helper()
		res, err := b.Exec(context.Background(), sandbox.Request{AgentID: "main", SessionKey: "s1", Command: cmd, Egress: eg, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatalf("%q: %v", cmd, err)
		}
		return res.Stdout + res.Stderr, res.ExitCode
	}
	if out, code := exe("curl -sS http://example.com:" + port + "/"); code != 0 || out != "hello from example.com:"+port {
		t.Fatalf("curl to a listed name through the relay: exit %d, %q", code, out)
	}
	rec := recs.wait(t, "of example.com", func(r egress.Record) bool { return r.Host == "example.com" && r.Allowed })
	if rec.RunID != "bwrun1" || rec.AgentID != "main" || rec.Up == 0 || rec.Down == 0 {
		t.Errorf("record %+v: want the run, agent and bytes each way", rec)
	}
	if out, code := exe("curl -fsS http://other.test:" + port + "/"); code == 0 || strings.Contains(out, "hello") {
		t.Fatalf("a name on no pattern was reached: %q", out)
	}
	recs.wait(t, "refusing other.test", func(r egress.Record) bool { return r.Host == "other.test" && !r.Allowed })
	host := hostAddr(t)
	for _, target := range []string{"127.0.0.1:" + port, host + ":" + port} {
		if out, code := exe("curl -fsS --noproxy '*' -m 5 http://" + target + "/"); code == 0 || strings.Contains(out, "hello") {
			t.Errorf("a direct connection to %s from the egress sandbox: %q", target, out)
		}
	}
	if out, code := exe("getent hosts example.com || curl -fsS --noproxy '*' -m 5 http://example.com:" + port + "/"); code == 0 {
		t.Errorf("a name resolved without the proxy: %q", out)
	}
	// The control: the same listener, reached directly from the host.
	out, err := exec.Command("curl", "-sS", "--noproxy", "*", "-m", "5", "http://"+host+":"+port+"/").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "hello") {
		t.Fatalf("control: the host does not reach its own listener at %s: %v %q", host, err, out)
	}
}

// TestEgressBwrapRefusedWithoutAgent: per-command sandboxes run no relay,
// so a run with a list is refused with ErrNoEgress and does not run; the
// control, the same request without the list, runs.
func TestEgressBwrapRefusedWithoutAgent(t *testing.T) {
	b, stateDir := open(t, func(c *sandbox.Config) { c.Agent = sandbox.AgentOff })
	req := sandbox.Request{AgentID: "main", SessionKey: "s1", Command: "echo ran > /workspace/egress-ran",
		Egress: &sandbox.Egress{Key: "k", Serve: func(ln net.Listener) error { return ln.Close() }}}
	if err := sandbox.CheckEgress(b, req); !errors.Is(err, sandbox.ErrNoEgress) || !strings.Contains(err.Error(), "resident agent") {
		t.Errorf("CheckEgress = %v, want ErrNoEgress naming the agent", err)
	}
	if res, err := b.Exec(context.Background(), req); !errors.Is(err, sandbox.ErrNoEgress) {
		t.Fatalf("Exec with a list = %+v, %v; want ErrNoEgress", res, err)
	}
	mark := filepath.Join(sandbox.WorkspaceRoot(sandbox.DefaultConfig(), stateDir), "main", "egress-ran")
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the refused run ran")
	}
	req.Egress = nil
	if res := run(t, b, req); res.ExitCode != 0 {
		t.Errorf("control without the list: %+v", res)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Errorf("control: %v", err)
	}
}
