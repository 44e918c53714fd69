package host

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/policy"
)

// BenchmarkEgressJail measures a jailed curl's connections through the
// relay and the egress proxy against the same curl in a jail with network
// all connecting directly, interleaved run by run in the same process:
// per connection (conns fresh TLS connections in one run, the server
// closing each) and per MiB (one run fetching mib MiB). Each figure is the
// median over b.N runs; the difference divided by the count is the
// overhead. The run's start is in both and cancels out.
//
//	go test -run '^$' -bench BenchmarkEgressJail -benchtime 20x ./internal/host/
func BenchmarkEgressJail(b *testing.B) {
	const conns, mib = egressBenchConns, egressBenchMiB
	srv := httptest.NewTLSServer(egressBenchHandler())
	defer srv.Close()
	mk := func(egress []string, word string) *egressFixture {
		f := newEgressFixture(b, policy.AskOff, egress, word, "")
		f.srv.Close()
		return f
	}
	port := srv.Listener.Addr().String()[strings.LastIndex(srv.Listener.Addr().String(), ":")+1:]
	viaProxy := mk([]string{"example.com:" + port + "/private"}, "")
	direct := mk(nil, "all")
	// In each run's own directory (its cwd): a fixture's directory under
	// the host's /tmp is not in the other's view (each has a private /tmp).
	const cacert = "bench-ca.pem"
	for _, f := range []*egressFixture{viaProxy, direct} {
		if err := os.WriteFile(filepath.Join(f.dir, cacert), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	urls := func(host string) []string {
		var a []string
		for range conns {
			a = append(a, "https://"+host+":"+port+"/one")
		}
		return a
	}
	argvConns := func(host string, extra ...string) []string {
		return append(append([]string{"curl", "-sS", "-o", "/dev/null", "--cacert", cacert}, extra...), urls(host)...)
	}
	argvMiB := func(host string, extra ...string) []string {
		return append(append([]string{"curl", "-sS", "-o", "/dev/null", "--cacert", cacert}, extra...), "https://"+host+":"+port+"/mib")
	}
	var pc, dc, pm, dm []time.Duration
	timeRun := func(f *egressFixture, argv []string) time.Duration {
		start := time.Now()
		if out, code := f.run(b, argv...); code != 0 {
			b.Fatalf("%q: exit %d %s", argv[:3], code, out)
		}
		return time.Since(start)
	}
	b.ResetTimer()
	for range b.N {
		dc = append(dc, timeRun(direct, argvConns("example.com", "--noproxy", "*", "--resolve", "example.com:"+port+":127.0.0.1")))
		pc = append(pc, timeRun(viaProxy, argvConns("example.com")))
		dm = append(dm, timeRun(direct, argvMiB("example.com", "--noproxy", "*", "--resolve", "example.com:"+port+":127.0.0.1")))
		pm = append(pm, timeRun(viaProxy, argvMiB("example.com")))
	}
	b.StopTimer()
	reportEgress(b, "the proxy", dc, pc, dm, pm)
}

// egressBenchConns and egressBenchMiB are what one run of an egress
// benchmark fetches: that many fresh connections, or that many MiB.
const egressBenchConns, egressBenchMiB = 40, 32

// egressBenchHandler serves the egress benchmarks: a byte on each
// connection, closing it, or egressBenchMiB MiB at /mib.
func egressBenchHandler() http.Handler {
	body := []byte(strings.Repeat("x", 1<<20))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		if r.URL.Path == "/mib" {
			w.Header().Set("Content-Length", strconv.Itoa(egressBenchMiB<<20))
			for range egressBenchMiB {
				w.Write(body)
			}
			return
		}
		w.Write([]byte("x"))
	})
}

// reportEgress reports the medians of the runs, direct (dc, dm) and
// through via (pc, pm), per connection and per MiB, and their difference.
func reportEgress(b *testing.B, via string, dc, pc, dm, pm []time.Duration) {
	med := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	const conns, mib = egressBenchConns, egressBenchMiB
	b.ReportMetric(float64(med(dc).Microseconds())/conns, "direct-µs/conn")
	b.ReportMetric(float64(med(pc).Microseconds())/conns, "proxy-µs/conn")
	b.ReportMetric(float64((med(pc)-med(dc)).Microseconds())/conns, "overhead-µs/conn")
	b.ReportMetric(float64(med(dm).Microseconds())/mib, "direct-µs/MiB")
	b.ReportMetric(float64(med(pm).Microseconds())/mib, "proxy-µs/MiB")
	b.ReportMetric(float64((med(pm)-med(dm)).Microseconds())/mib, "overhead-µs/MiB")
	b.Logf("runs: %d connections %s direct, %s through %s; %d MiB %s direct, %s through it (medians of %d)", conns, med(dc), med(pc), via, mib, med(dm), med(pm), len(dc))
}
