package host

import (
	"fmt"
	"net"
	"net/http"
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
	const conns = egressBenchConns
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: egressBenchHandler(), ReadHeaderTimeout: 10 * time.Second}
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
	reportEgress(b, "the relay and proxy", dc, pc, dm, pm)
}
