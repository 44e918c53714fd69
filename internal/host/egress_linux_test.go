package host

import (
	"bufio"
	"context"
	"encoding/pem"
	"fmt"
	"github.com/exechost/exechost/internal/egress/egresstest"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/jail"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/testdep"
)

// egressPrompter answers egress prompts from a script and keeps them.
type egressPrompter struct {
	mu     sync.Mutex
	answer policy.Approval
	asked  []prompt.Request
}

func (p *egressPrompter) Prompt(_ context.Context, req prompt.Request) (policy.Approval, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, req)
	return p.answer, "tester", nil
}

// netprobe is a program a run starts to try a way out that skips the
// proxy: tcp, mptcp or udp to host:port, or a name lookup (dns).
const netprobe = `#!/usr/bin/python3
import socket, sys
mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    if mode == "tcp":
        s = socket.create_connection((host, port), timeout=3); s.sendall(b"x")
    elif mode == "mptcp":
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262); s.settimeout(3); s.connect((host, port)); s.sendall(b"x")
    elif mode == "udp":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"x", (host, port))
    elif mode == "dns":
        socket.getaddrinfo(host, port)
    print("reached")
except Exception as e:
    print("failed:", e)
    sys.exit(1)
`

type egressFixture struct {
	*fixture
	srv    *httptest.Server
	port   string
	cacert string
}

// newEgressFixture is an engine whose runs may start curl and netprobe,
// with a local HTTPS server (its certificate names example.com) that the
// engine's proxy finds under example.com and other.test, and the
// defaults' confine.network set to network.
func newEgressFixture(t testing.TB, ask policy.Ask, network []string, word string, unsupported string) *egressFixture {
	t.Helper()
	if !jail.Supported {
		t.Skip("the jail is Linux only")
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		testdep.Missing(t, "python3", "netprobe runs in the jail")
	}
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		testdep.Missing(t, "curl", "the egress tests run it in the jail")
	}
	f := newFixture(t, policy.SecurityAllowlist, ask, policy.FallbackDeny, "/usr/bin/curl", "$BIN/netprobe", "/usr/bin/getent")
	if err := os.WriteFile(filepath.Join(f.bin, "netprobe"), []byte(netprobe), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from "+r.Host)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	cacert := filepath.Join(f.dir, "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(cacert, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	loop := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	f.engine.egr.resolver = egresstest.Resolver{"example.com": loop, "other.test": loop}
	var list []string
	for _, s := range network {
		list = append(list, strings.ReplaceAll(s, "$PORT", port))
	}
	if _, err := f.store.Update(func(file *approvals.File) error {
		file.Defaults.Confine = &approvals.Confine{Egress: list, Network: word, Unsupported: unsupported}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return &egressFixture{fixture: f, srv: srv, port: port, cacert: cacert}
}

func (f *egressFixture) run(t testing.TB, argv ...string) (string, int) {
	t.Helper()
	res, err := f.engine.Run(context.Background(), Request{Argv: argv, Cwd: f.dir, TimeoutMs: 30_000})
	if err != nil {
		t.Fatalf("%q: %v", argv, err)
	}
	return string(res.Stdout) + string(res.Stderr), res.ExitCode
}

// egressRecords are the audit lines of connections (and answers).
func (f *egressFixture) egressRecords() []audit.Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []audit.Record
	for _, r := range f.audits {
		if l := r.Line(); l.Event == audit.EventEgress {
			out = append(out, l)
		}
	}
	return out
}

// waitRecord waits for an egress record that ok accepts: a connection's
// record is written when the proxy sees it end.
func (f *egressFixture) waitRecord(t *testing.T, what string, ok func(audit.Record) bool) audit.Record {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, r := range f.egressRecords() {
			if ok(r) {
				return r
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no egress record %s within 10s; have %+v", what, f.egressRecords())
	return audit.Record{}
}

// TestEgressByNameInJail: a run whose confine.network lists example.com
// reaches it over HTTPS through the proxy from inside the jail, with its
// bytes on the audit record under the rule that allowed it; a name on no
// pattern is refused (curl's CONNECT gets 403) and recorded as refused;
// a listed name without /private that resolves to loopback (a rebinding
// of a public name inward) is refused, as docs/policy.md says.
func TestEgressByNameInJail(t *testing.T) {
	f := newEgressFixture(t, policy.AskOff, []string{"example.com:$PORT/private", "rebound.test:$PORT"}, "", "")
	f.engine.egr.resolver.(egresstest.Resolver)["rebound.test"] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	out, code := f.run(t, "curl", "-sS", "--cacert", f.cacert, "https://example.com:"+f.port+"/")
	if code != 0 || !strings.Contains(out, "hello from example.com") {
		t.Fatalf("curl to a listed name through the jail: exit %d, %q", code, out)
	}
	rec := f.waitRecord(t, "for example.com", func(r audit.Record) bool {
		return r.Egress != nil && r.Egress.Target == "example.com:"+f.port && r.Decision == audit.DecisionAllow
	})
	if rec.Egress.Rule != "example.com:"+f.port+"/private" || rec.Egress.Up < 100 || rec.Egress.Down < 100 || rec.RunID == "" || rec.AgentID == "" || rec.Egress.Method != http.MethodConnect {
		t.Errorf("record %+v %+v: want the rule, bytes each way, run and agent", rec, *rec.Egress)
	}
	out, code = f.run(t, "curl", "-sS", "-k", "https://other.test:"+f.port+"/")
	if code == 0 || strings.Contains(out, "hello") {
		t.Fatalf("curl to a name on no pattern reached it: exit %d, %q", code, out)
	}
	rec = f.waitRecord(t, "refusing other.test", func(r audit.Record) bool {
		return r.Egress != nil && r.Egress.Target == "other.test:"+f.port
	})
	if rec.Decision != audit.DecisionDeny || !strings.Contains(rec.Reason, "on no egress pattern") {
		t.Errorf("refusal record %+v", rec)
	}
	if out, code := f.run(t, "curl", "-sS", "-k", "https://rebound.test:"+f.port+"/"); code == 0 {
		t.Fatalf("a listed name resolving to loopback was reached: %q", out)
	}
	f.waitRecord(t, "refusing rebound.test", func(r audit.Record) bool {
		return r.Egress != nil && r.Egress.Target == "rebound.test:"+f.port && r.Decision == audit.DecisionDeny && strings.Contains(r.Reason, "a loopback address")
	})
	// The reach line names the list.
	p, err := f.engine.Prepare(Request{Argv: []string{"curl", "x"}, Cwd: f.dir})
	if err != nil {
		t.Fatal(err)
	}
	if txt := f.engine.ConfinementText(p); !strings.Contains(txt, "egress by name through exechost's proxy to example.com:"+f.port+"/private, rebound.test:"+f.port+"; others refused") {
		t.Errorf("reach line %q does not name the egress list", txt)
	}
}

// TestEgressAsked: under ask=on-miss a connection to an address on no
// pattern is put to the Prompter ("`curl` in run … wants 127.0.0.1:P");
// deny refuses it; allow-once lets it through (its bytes on the record,
// with the answer and who gave it); allow-always adds the pattern to
// exec-approvals.json, keeping what was there, so the next run reaches it
// unasked. (An IP literal is asked for: an approved name that resolves
// to loopback stays refused, see TestEgressByNameInJail.)
func TestEgressAsked(t *testing.T) {
	f := newEgressFixture(t, policy.AskOnMiss, []string{"example.com:$PORT/private"}, "", "")
	pr := &egressPrompter{answer: policy.Reject}
	f.engine.Prompter = pr
	target := "127.0.0.1:" + f.port
	get := []string{"curl", "-sS", "--cacert", f.cacert, "https://" + target + "/"}
	if out, code := f.run(t, get...); code == 0 {
		t.Fatalf("denied connection went through: %q", out)
	}
	pr.mu.Lock()
	if len(pr.asked) != 1 || !strings.HasPrefix(pr.asked[0].Command, "`curl` in run ") || !strings.HasSuffix(pr.asked[0].Command, " wants "+target) ||
		pr.asked[0].AllowAlways == nil || !strings.Contains(pr.asked[0].Confinement, "egress by name") {
		t.Fatalf("prompts %+v: want one egress question", pr.asked)
	}
	pr.answer = policy.AllowOnce
	pr.mu.Unlock()
	if out, code := f.run(t, get...); code != 0 || !strings.Contains(out, "hello from "+target) {
		t.Fatalf("allow-once: exit %d %q; records %+v", code, out, f.egressRecords())
	}
	f.waitRecord(t, "allowed once", func(r audit.Record) bool {
		return r.Egress != nil && r.Egress.Target == target && r.Egress.Rule == "approval allow-once" && r.Egress.Down > 0
	})
	f.waitRecord(t, "of the answer", func(r audit.Record) bool {
		return r.Egress != nil && r.Approval == string(policy.AllowOnce) && r.DecidedBy == "tester"
	})
	pr.mu.Lock()
	pr.answer = policy.AllowAlways
	pr.mu.Unlock()
	if out, code := f.run(t, get...); code != 0 {
		t.Fatalf("allow-always: exit %d %q", code, out)
	}
	file, err := f.store.Load()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"example.com:" + f.port + "/private", target}
	if got := file.Defaults.Confine.Egress; !slices.Equal(got, want) {
		t.Fatalf("confine.network after allow-always = %q, want %q", got, want)
	}
	pr.mu.Lock()
	n := len(pr.asked)
	pr.answer = policy.Reject
	pr.mu.Unlock()
	if out, code := f.run(t, get...); code != 0 {
		t.Fatalf("after allow-always: exit %d %q", code, out)
	}
	pr.mu.Lock()
	if len(pr.asked) != n {
		t.Errorf("a listed address was asked about again")
	}
	pr.mu.Unlock()
}

// TestEgressNoOtherWayOut: from the egress jail a TCP, MPTCP or UDP
// connection that skips the proxy reaches nothing (a listener on the
// host's own address sees nothing) and no name resolves; the control,
// the same runs with network all, reaches the listeners. The seccomp
// layer is left out in both, so MPTCP is held by the network namespace
// alone.
func TestEgressNoOtherWayOut(t *testing.T) {
	addr := hostAddr(t)
	for _, tc := range []struct {
		name    string
		egress  []string
		word    string
		reached bool
	}{
		{"egress list", []string{"example.com:443"}, "", false},
		{"control network all", nil, "all", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newEgressFixture(t, policy.AskOff, tc.egress, tc.word, "warn")
			f.engine.JailLayers = slices.DeleteFunc(slices.Clone(jail.AllLayers), func(l confine.Layer) bool { return l == confine.LayerSeccomp })
			for _, mode := range []string{"tcp", "mptcp", "udp"} {
				got := make(chan string, 4)
				port := listen(t, mode, addr, got)
				out, code := f.run(t, "netprobe", mode, addr, port)
				var seen bool
				select {
				case <-got:
					seen = true
				case <-time.After(2 * time.Second):
				}
				if seen != tc.reached {
					t.Errorf("%s to %s:%s: listener reached = %v, want %v (exit %d %q)", mode, addr, port, seen, tc.reached, code, out)
				}
			}
			if tc.reached {
				return
			}
			if out, code := f.run(t, "netprobe", "dns", "example.com", "443"); code == 0 {
				t.Errorf("a name resolved inside the egress jail: %q", out)
			}
		})
	}
}

// hostAddr is an address of this host other than loopback (the jail's
// loopback is its own), or loopback when it has none.
func hostAddr(t *testing.T) string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return "127.0.0.1"
}

// listen starts a listener of mode on addr that sends what it receives
// to got, and returns its port.
func listen(t *testing.T, mode, addr string, got chan<- string) string {
	t.Helper()
	if mode == "udp" {
		pc, err := net.ListenPacket("udp4", addr+":0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pc.Close() })
		go func() {
			b := make([]byte, 64)
			if n, _, err := pc.ReadFrom(b); err == nil {
				got <- string(b[:n])
			}
		}()
		return strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port)
	}
	ln, err := net.Listen("tcp4", addr+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		l, _ := bufio.NewReader(c).ReadByte()
		got <- string(l)
	}()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// silentPrompter never answers: the prompt waits until its deadline.
type silentPrompter struct{ asked chan prompt.Request }

func (p silentPrompter) Prompt(ctx context.Context, req prompt.Request) (policy.Approval, string, error) {
	p.asked <- req
	<-ctx.Done()
	return "", "", ctx.Err()
}

// TestEgressAskFallback: a question nobody answers ends at the engine's
// prompt timeout and askFallback decides: deny refuses the connection,
// full lets it through once; both are on the record. Closing the engine
// removes the proxy's socket directory.
func TestEgressAskFallback(t *testing.T) {
	for _, tc := range []struct {
		fb     policy.Fallback
		wantOK bool
	}{{policy.FallbackDeny, false}, {policy.FallbackFull, true}} {
		t.Run(string(tc.fb), func(t *testing.T) {
			f := newEgressFixture(t, policy.AskOnMiss, []string{"example.com:$PORT/private"}, "", "")
			if _, err := f.store.Update(func(file *approvals.File) error { file.Defaults.AskFallback = string(tc.fb); return nil }); err != nil {
				t.Fatal(err)
			}
			sp := silentPrompter{asked: make(chan prompt.Request, 4)}
			f.engine.Prompter, f.engine.PromptTimeout = sp, 500*time.Millisecond
			target := "127.0.0.1:" + f.port
			start := time.Now()
			out, code := f.run(t, "curl", "-sS", "--cacert", f.cacert, "https://"+target+"/")
			if got := code == 0; got != tc.wantOK {
				t.Fatalf("connection through = %v, want %v: exit %d %q", got, tc.wantOK, code, out)
			}
			if took := time.Since(start); took < 500*time.Millisecond || took > 20*time.Second {
				t.Errorf("the run took %s: the question should wait for the prompt timeout, bounded", took)
			}
			select {
			case <-sp.asked:
			default:
				t.Fatal("nobody was asked")
			}
			f.waitRecord(t, "decided by askFallback", func(r audit.Record) bool {
				return r.Egress != nil && r.Egress.Target == target && strings.Contains(r.Reason, "askFallback") && (r.Decision == audit.DecisionAllow) == tc.wantOK
			})
			f.engine.egr.mu.Lock()
			dir := f.engine.egr.dir
			f.engine.egr.mu.Unlock()
			if _, err := os.Stat(filepath.Join(dir, "proxy.sock")); err != nil {
				t.Fatalf("the proxy's socket: %v", err)
			}
			f.engine.Close()
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the proxy's directory %s outlives the engine: %v", dir, err)
			}
		})
	}
}

// TestEgressJailsKeptApart: runs share a standing jail (its loopback and
// process list, where one could read another's proxy credentials) only
// when their egress policy is the same: two agents with the same list get
// two jails; two runs of one agent get one.
func TestEgressJailsKeptApart(t *testing.T) {
	f := newEgressFixture(t, policy.AskOff, []string{"example.com:443"}, "", "")
	key := func(agent string) string {
		t.Helper()
		p, err := f.engine.Prepare(Request{Argv: []string{"curl", "x"}, Cwd: f.dir, AgentID: agent})
		if err != nil {
			t.Fatal(err)
		}
		relay, err := f.engine.egressRelay(p)
		if err != nil || relay == nil {
			t.Fatalf("relay %v %v", relay, err)
		}
		o := f.engine.jailOptions(f.engine.confinement(p, "/tmp/x"), "/tmp/x", relay)
		return o.Key()
	}
	if a, b := key("a"), key("b"); a == b {
		t.Errorf("agents a and b share jail %s", a)
	}
	if a1, a2 := key("a"), key("a"); a1 != a2 {
		t.Errorf("two runs of agent a get jails %s and %s", a1, a2)
	}
}
