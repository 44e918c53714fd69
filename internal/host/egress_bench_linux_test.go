package host

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
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
	const conns, mib = 40, 32
	body := strings.Repeat("x", 1<<20)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		if r.URL.Path == "/mib" {
			for range mib {
				w.Write([]byte(body))
			}
			return
		}
		w.Write([]byte("x"))
	}))
	defer srv.Close()
	mk := func(egress []string, word string) *egressFixture {
		f := newEgressFixture(b, policy.AskOff, egress, word, "")
		f.srv.Close()
		return f
	}
	port := srv.Listener.Addr().String()[strings.LastIndex(srv.Listener.Addr().String(), ":")+1:]
	viaProxy := mk([]string{"example.com:" + port + "/private"}, "")
	direct := mk(nil, "all")
	cacert := filepath.Join(viaProxy.dir, "bench-ca.pem")
	if err := os.WriteFile(cacert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		b.Fatal(err)
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
	med := func(d []time.Duration) time.Duration {
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2]
	}
	b.ReportMetric(float64(med(dc).Microseconds())/conns, "direct-µs/conn")
	b.ReportMetric(float64(med(pc).Microseconds())/conns, "proxy-µs/conn")
	b.ReportMetric(float64((med(pc)-med(dc)).Microseconds())/conns, "overhead-µs/conn")
	b.ReportMetric(float64(med(dm).Microseconds())/mib, "direct-µs/MiB")
	b.ReportMetric(float64(med(pm).Microseconds())/mib, "proxy-µs/MiB")
	b.ReportMetric(float64((med(pm)-med(dm)).Microseconds())/mib, "overhead-µs/MiB")
	b.Logf("runs: %d connections %s direct, %s through the proxy; %d MiB %s direct, %s through the proxy (medians of %d)", conns, med(dc), med(pc), mib, med(dm), med(pm), b.N)
}
