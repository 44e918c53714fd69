package jail

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/testproc"
)

// BenchmarkJailedStartCPU measures the CPU a run of /bin/true costs in a
// standing jail with every layer (issue 39: a jailed run's CPU beside a
// bare spawn's), split as the jail's server spends it and as the run
// itself does, beside a bare spawn of the same file from this process in
// the same benchmark: server-ms/op, run-ms/op and bare-ms/op. Both runs
// are children reaped by their parents, so their CPU is the same
// accounting (the server's waited-for children; the spawn's rusage).
func BenchmarkJailedStartCPU(b *testing.B) {
	w := outsideDir(b)
	j := jailFor(b, confine.Confinement{Writable: []string{w}, Network: confine.NetworkNone}, nil)
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer null.Close()
	exe, err := os.Open("/bin/true")
	if err != nil {
		b.Fatal(err)
	}
	defer exe.Close()
	jailed := func() {
		p, err := j.Start(Request{Argv: []string{"/bin/true"}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: w,
			Stdin: int(null.Fd()), Stdout: int(null.Fd()), Stderr: int(null.Fd()), Exec: int(exe.Fd())})
		if err != nil {
			b.Fatal(err)
		}
		st, err := p.Wait(30 * time.Second)
		p.Close()
		if err != nil || st.ExitStatus() != 0 {
			b.Fatalf("jailed /bin/true: status %v, %v", st, err)
		}
	}
	for range 5 { // the jail stands and has forked before
		jailed()
	}
	server0, runs0 := ticks(b, j.Pid())
	sw0 := testproc.ContextSwitches(j.Pid())
	var bare time.Duration
	for b.Loop() {
		jailed()
		c := exec.Command("/bin/true")
		if err := c.Run(); err != nil {
			b.Fatal(err)
		}
		bare += c.ProcessState.UserTime() + c.ProcessState.SystemTime()
	}
	server1, runs1 := ticks(b, j.Pid())
	sw1 := testproc.ContextSwitches(j.Pid())
	perOp := func(t int64) float64 { return float64(t) * 10 / float64(b.N) } // USER_HZ 100: 10 ms a tick
	b.ReportMetric(perOp(server1-server0), "server-ms/op")
	b.ReportMetric(perOp(runs1-runs0), "run-ms/op")
	b.ReportMetric(float64(bare)/1e6/float64(b.N), "bare-ms/op")
	b.ReportMetric(float64(sw1-sw0)/float64(b.N), "server-switches/op")
}

// ticks are pid's own CPU and its waited-for children's, in clock ticks.
func ticks(b *testing.B, pid int) (own, children int64) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // from the state, field 3
	n := func(i int) int64 {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	return n(11) + n(12), n(13) + n(14) // utime stime, cutime cstime
}
