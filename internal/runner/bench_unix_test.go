//go:build unix

package runner

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/testdep"
)

// Spawn cost: Run of /bin/true against plain os/exec of the same program.
// Compare ns/op of the two in one run:
//
//	go test -run '^$' -bench 'SpawnTrue|BaselineExecTrue' ./internal/runner/

// BenchmarkSpawnTrue measures Run's whole overhead for a trivial command:
// environment scrub, pipes, process group, pinned thread, wait and drain.
func BenchmarkSpawnTrue(b *testing.B) {
	truePath := testdep.Binary(b, "true")
	spec := Spec{Argv: []string{truePath}}
	for b.Loop() {
		res, err := testRunner.Run(context.Background(), spec)
		if err != nil || !res.Success {
			b.Fatalf("Run = %+v, %v", res, err)
		}
	}
}

// BenchmarkBaselineExecTrue is the baseline for BenchmarkSpawnTrue: os/exec
// with its own output handling (none) and no process group.
func BenchmarkBaselineExecTrue(b *testing.B) {
	truePath := testdep.Binary(b, "true")
	for b.Loop() {
		if err := exec.Command(truePath).Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// Output capping of a 1 GiB flood. Throughput (MB/s) of Run capturing
// `head -c 1GiB /dev/zero` against the issue's baseline, `head | cat >
// /dev/null`, and against os/exec copying into a counting writer, all in
// one run:
//
//	go test -run '^$' -bench 'Flood' -benchtime 3x ./internal/runner/

// BenchmarkFloodCapture runs the flood through Run and Capture.
func BenchmarkFloodCapture(b *testing.B) {
	head := testdep.Binary(b, "head")
	spec := Spec{Argv: []string{head, "-c", strconv.Itoa(floodBytes), "/dev/zero"}}
	b.SetBytes(floodBytes)
	for b.Loop() {
		res, err := testRunner.Run(context.Background(), spec)
		if err != nil || !res.Success || !res.Truncated || len(res.Stdout) != MaxOutput+1+len(TruncatedSuffix) {
			b.Fatalf("Run = exit %d, truncated %v, %d bytes, %v", res.ExitCode, res.Truncated, len(res.Stdout), err)
		}
	}
}

// BenchmarkBaselineFloodCat is the baseline: the same flood through
// a pipe into cat writing to /dev/null.
func BenchmarkBaselineFloodCat(b *testing.B) {
	testdep.Binary(b, "head")
	testdep.Binary(b, "cat")
	script := fmt.Sprintf("head -c %d /dev/zero | cat > /dev/null", floodBytes)
	b.SetBytes(floodBytes)
	for b.Loop() {
		if err := exec.Command("/bin/sh", "-c", script).Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBaselineFloodDiscard is a second baseline: os/exec copying the
// flood from its pipe into a writer that only counts.
func BenchmarkBaselineFloodDiscard(b *testing.B) {
	head := testdep.Binary(b, "head")
	b.SetBytes(floodBytes)
	for b.Loop() {
		cmd := exec.Command(head, "-c", strconv.Itoa(floodBytes), "/dev/zero")
		cw := &countWriter{}
		cmd.Stdout = cw
		if err := cmd.Run(); err != nil || cw.n != floodBytes {
			b.Fatalf("copied %d bytes: %v", cw.n, err)
		}
	}
}

// BenchmarkFloodPeakRSS re-executes the test binary to run the 1 GiB flood
// once per iteration in a fresh process, and reports that process's peak
// resident set size (VmHWM, read by the process itself after the run) as
// peakRSS-MB — for Run with Capture ("capture") and for the os/exec
// counting baseline ("baseline"), whose figure is the floor any Go process
// doing this pays. A fresh process per iteration keeps the benchmark's own
// allocations out of the figure.
//
//	go test -run '^$' -bench 'FloodPeakRSS' -benchtime 3x ./internal/runner/
func BenchmarkFloodPeakRSS(b *testing.B) {
	testdep.Binary(b, "head")
	if _, err := vmHWM(); err != nil {
		b.Skip(err)
	}
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, role := range []string{"capture", "baseline"} {
		b.Run(role, func(b *testing.B) {
			helper := map[string]string{"capture": "flood", "baseline": "flood-baseline"}[role]
			var peakKB, secs float64
			for b.Loop() {
				cmd := exec.Command(exe)
				cmd.Env = append(os.Environ(), helperEnv+"="+helper)
				cmd.Stderr = os.Stderr
				out, err := cmd.Output()
				if err != nil {
					b.Fatalf("flood helper: %v", err)
				}
				var kb, n int64
				var s float64
				if _, err := fmt.Sscan(strings.TrimSpace(string(out)), &kb, &n, &s); err != nil || n != floodBytes {
					b.Fatalf("flood helper printed %q: %v", out, err)
				}
				peakKB = max(peakKB, float64(kb))
				secs += s
			}
			b.SetBytes(floodBytes)
			b.ReportMetric(peakKB/1024, "peakRSS-MB")
			b.ReportMetric(float64(b.N)*floodBytes/1e6/secs, "inproc-MB/s")
		})
	}
}

// Ratios under changing load: on a shared machine the separate benchmarks
// above can run under different loads, so these alternate the measured and
// the baseline operation within every iteration and report both and their
// ratio (runner over baseline: 1.0 is no overhead).
//
//	go test -run '^$' -bench 'Ratio' -benchtime 20x ./internal/runner/

// BenchmarkSpawnRatio alternates Run of true with plain os/exec of it.
func BenchmarkSpawnRatio(b *testing.B) {
	truePath := testdep.Binary(b, "true")
	spec := Spec{Argv: []string{truePath}}
	var runNs, baseNs time.Duration
	for b.Loop() {
		t0 := time.Now()
		if res, err := testRunner.Run(context.Background(), spec); err != nil || !res.Success {
			b.Fatalf("Run = %+v, %v", res, err)
		}
		t1 := time.Now()
		if err := exec.Command(truePath).Run(); err != nil {
			b.Fatal(err)
		}
		runNs, baseNs = runNs+t1.Sub(t0), baseNs+time.Since(t1)
	}
	b.ReportMetric(float64(runNs.Nanoseconds())/float64(b.N), "run-ns/op")
	b.ReportMetric(float64(baseNs.Nanoseconds())/float64(b.N), "baseline-ns/op")
	b.ReportMetric(float64(runNs)/float64(baseNs), "run/baseline")
}

// BenchmarkFloodRatio alternates the 1 GiB flood through Run with the
// issue's baseline, head | cat > /dev/null, and reports each one's MB/s and
// the throughput ratio (runner over baseline: 1.0 is as fast as cat).
func BenchmarkFloodRatio(b *testing.B) {
	head := testdep.Binary(b, "head")
	testdep.Binary(b, "cat")
	spec := Spec{Argv: []string{head, "-c", strconv.Itoa(floodBytes), "/dev/zero"}}
	script := fmt.Sprintf("head -c %d /dev/zero | cat > /dev/null", floodBytes)
	var runD, baseD time.Duration
	for b.Loop() {
		t0 := time.Now()
		if res, err := testRunner.Run(context.Background(), spec); err != nil || !res.Success || !res.Truncated {
			b.Fatalf("Run = exit %d, truncated %v: %v", res.ExitCode, res.Truncated, err)
		}
		t1 := time.Now()
		if err := exec.Command("/bin/sh", "-c", script).Run(); err != nil {
			b.Fatal(err)
		}
		runD, baseD = runD+t1.Sub(t0), baseD+time.Since(t1)
	}
	mbps := func(d time.Duration) float64 { return float64(b.N) * floodBytes / 1e6 / d.Seconds() }
	b.ReportMetric(mbps(runD), "run-MB/s")
	b.ReportMetric(mbps(baseD), "baseline-MB/s")
	b.ReportMetric(mbps(runD)/mbps(baseD), "run/baseline")
}
