package host

import (
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/policy"
)

// BenchmarkEgressDockerSandbox measures busybox wget in a Docker sandbox
// through the agent's relay and the engine's proxy (agent main, whose
// policy lists the server's name) against the same wget in a container of
// the same backend with Docker's bridge network connecting directly
// (agent direct, no list: the floor), interleaved run by run: per
// connection (conns fresh connections in one run, the server closing
// each) and per MiB (one run fetching mib MiB). Each figure is the median
// over b.N runs divided by the count; the run's own cost is in both and
// cancels out of the difference.
//
//	go test -run '^$' -bench BenchmarkEgressDockerSandbox -benchtime 10x ./internal/host/
func BenchmarkEgressDockerSandbox(b *testing.B) {
	const conns, mib = 40, 32
	body := strings.Repeat("x", 1<<20)
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		if r.URL.Path == "/mib" {
			w.Header().Set("Content-Length", fmt.Sprint(mib<<20))
			for range mib {
				w.Write([]byte(body))
			}
			return
		}
		w.Write([]byte("x"))
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	defer srv.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	f := newSandboxEgressFixture(b, dockerBackend("bridge"), "example.com:"+port+"/private")
	if _, err := f.store.Update(func(file *approvals.File) error {
		file.Agents["direct"] = &approvals.Agent{Confine: &approvals.Confine{Network: "all"}}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	bridge := dockerBridge(b)
	loop := func(base string) string {
		return fmt.Sprintf("for i in $(seq %d); do wget -q -O /dev/null %s/one || exit 1; done", conns, base)
	}
	timeRun := func(agent, cmd string) time.Duration {
		start := time.Now()
		res, err := f.runAs(b, agent, policy.AskOff, cmd)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%s: %q: %+v %v", agent, cmd, res, err)
		}
		return time.Since(start)
	}
	viaProxy, direct := "http://example.com:"+port, "http://"+bridge+":"+port
	// Both containers up before the clock starts.
	timeRun("main", "true")
	timeRun("direct", "true")
	var pc, dc, pm, dm []time.Duration
	b.ResetTimer()
	for range b.N {
		dc = append(dc, timeRun("direct", loop(direct)))
		pc = append(pc, timeRun("main", loop(viaProxy)))
		dm = append(dm, timeRun("direct", "wget -q -O /dev/null "+direct+"/mib"))
		pm = append(pm, timeRun("main", "wget -q -O /dev/null "+viaProxy+"/mib"))
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
	b.Logf("runs: %d connections %s direct, %s through the relay and proxy; %d MiB %s direct, %s through them (medians of %d)", conns, med(dc), med(pc), mib, med(dm), med(pm), b.N)
}
