//go:build linux

package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/exechost/exechost/internal/reexec"
)

// bench holds the run's settings and collected rows.
type bench struct {
	quick   bool
	nodes   int
	bin     string
	tmp     string
	out     string // outDir's directory, once made
	rows    []row
	cleanup []func()
	profile string // pprof excerpt for missed targets
	// alwaysProfile adds the profiles even when the targets are met.
	alwaysProfile bool
	notes         []string
}

// iters picks the iteration count for the full or quick run.
func (b *bench) iters(full, quick int) int {
	if b.quick {
		return quick
	}
	return full
}

func (b *bench) add(r row) {
	b.rows = append(b.rows, r)
	p50, p99, ratio := r.cells()
	status := ""
	if r.err != nil {
		status = "  [" + r.err.Error() + "]"
	}
	fmt.Fprintf(os.Stderr, "  %-46s p50 %-12s p99 %-12s %-8s%s\n", r.what, p50, p99, ratio, status)
}

func main() {
	if reexec.Init() {
		return // the interpreter, the bwrap helper, the agent: this binary re-executed
	}
	if helperMain() {
		return
	}
	var (
		quick   = flag.Bool("quick", false, "short run: fewer iterations and 1,000 simulated nodes")
		out     = flag.String("out", "BENCHMARKS.md", "report to rewrite (empty: print only)")
		nodes   = flag.Int("nodes", 0, "simulated nodes for the scale rows (default 10000, -quick 1000)")
		only    = flag.String("only", "", "comma-separated sections to run: exec,throughput,output,memory,micro,confine,interpjail,audit,startup,floor,scale,sandbox,kubernetes,openclaw (openclaw runs last, in the same invocation, into its own block)")
		keepTmp = flag.Bool("keep", false, "keep the temporary state directories")
		prof    = flag.Bool("profile", false, "add the CPU profiles even when the targets are met")
		ocBench = flag.Bool("openclaw", false, "only the OpenClaw comparison (bench/openclaw.go): exechost vs OpenClaw's node host behind a real OpenClaw gateway")
	)
	flag.Parse()
	if *ocBench {
		*only = "openclaw"
	}
	// OpenClaw's comparison is its own block of the report; named with
	// other sections, it runs after them in this invocation, so all the
	// issue 39 rows come from one run.
	sections, withOpenClaw := dropSection(*only, "openclaw")
	if sections == "" && withOpenClaw {
		if err := runOpenClawBench(*quick, *out); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	b := &bench{quick: *quick, nodes: *nodes, alwaysProfile: *prof}
	if b.nodes == 0 {
		b.nodes = 10_000
		if b.quick {
			b.nodes = 1_000
		}
	}
	if err := b.run(sections); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		b.done(*keepTmp)
		os.Exit(1)
	}
	b.done(*keepTmp)
	md := b.markdown()
	fmt.Println(b.table())
	if *out != "" {
		if err := writeReport(*out, md); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "wrote", *out)
	}
	if withOpenClaw {
		fmt.Fprintln(os.Stderr, "== the OpenClaw comparison")
		if err := runOpenClawBench(*quick, *out); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
}

// dropSection removes name from the comma-separated list only and says
// whether it was there.
func dropSection(only, name string) (string, bool) {
	var kept []string
	found := false
	for _, s := range strings.Split(only, ",") {
		switch s {
		case name:
			found = true
		case "":
		default:
			kept = append(kept, s)
		}
	}
	return strings.Join(kept, ","), found
}

func (b *bench) done(keep bool) {
	for i := len(b.cleanup) - 1; i >= 0; i-- {
		b.cleanup[i]()
	}
	if !keep && b.tmp != "" {
		os.RemoveAll(b.tmp)
	}
}

// run builds the binary and runs the selected sections.
func (b *bench) run(only string) error {
	want := func(s string) bool { return only == "" || strings.Contains(","+only+",", ","+s+",") }
	raiseNoFile()
	var err error
	if b.tmp, err = os.MkdirTemp("", "exechost-bench-"); err != nil {
		return err
	}
	b.bin = filepath.Join(b.tmp, "exechost")
	fmt.Fprintln(os.Stderr, "building ./cmd/exechost (CGO_ENABLED=0 -trimpath)")
	build := exec.Command("go", "build", "-trimpath", "-o", b.bin, "./cmd/exechost")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build exechost: %w", err)
	}
	start := time.Now()
	if want("exec") || want("throughput") || want("output") || want("memory") {
		if err := b.clusterSections(want("exec"), want("throughput"), want("output"), want("memory")); err != nil {
			return err
		}
	}
	if want("micro") {
		fmt.Fprintln(os.Stderr, "== decision engine, output capping, approval socket")
		b.microRows()
	}
	if want("confine") {
		fmt.Fprintln(os.Stderr, "== kernel confinement per run")
		b.confineRows()
	}
	if want("interpjail") {
		fmt.Fprintln(os.Stderr, "== interpreted text in the standing jail")
		b.interpJailRows()
	}
	if want("audit") {
		fmt.Fprintln(os.Stderr, "== audit log append")
		b.auditRows()
	}
	if want("startup") {
		fmt.Fprintln(os.Stderr, "== startup and binary size")
		if err := b.startupRows(); err != nil {
			return err
		}
	}
	if want("floor") {
		fmt.Fprintln(os.Stderr, "== start-up beside the floor build")
		b.floorRows()
	}
	if want("sandbox") {
		fmt.Fprintln(os.Stderr, "== sandbox: resident agent vs a runtime per command")
		b.sandboxRows()
	}
	if want("kubernetes") {
		fmt.Fprintln(os.Stderr, "== kubernetes: resident agent in a pod vs kubectl exec, cold pod vs warm pool")
		b.kubernetesRows()
	}
	if want("scale") {
		fmt.Fprintf(os.Stderr, "== scale: %d simulated nodes\n", b.nodes)
		if err := b.scaleRows(); err != nil {
			return err
		}
	}
	b.notes = append(b.notes, fmt.Sprintf("Whole run took %s on %d CPUs (GOMAXPROCS %d), %s.",
		time.Since(start).Round(time.Second), runtime.NumCPU(), runtime.GOMAXPROCS(0), kernel()))
	return nil
}

// clusterSections starts one gateway with 16 nodes for the round-trip and
// throughput rows (and one more node for the memory rows).
func (b *bench) clusterSections(rt, tp, out, mem bool) error {
	fmt.Fprintln(os.Stderr, "== starting gateway and nodes")
	c, err := startCluster(b.bin, filepath.Join(b.tmp, "cluster"))
	if err != nil {
		return err
	}
	defer c.close()
	total := 1
	if tp {
		total = 16
	}
	for i := 0; i < total; i++ {
		if _, _, err := c.addNode(fmt.Sprintf("node%02d", i)); err != nil {
			return err
		}
	}
	var memNode *clusterNode
	idle := map[string]int64{}
	if mem {
		n, _, err := c.addNode("mem")
		if err != nil {
			return err
		}
		memNode = n
		time.Sleep(time.Second) // let start-up garbage be collected
		idle = daemonRSS(c, n)
	}
	if rt {
		fmt.Fprintln(os.Stderr, "== exec true round trip")
		b.roundTripRows(c, c.nodes[0].id)
	}
	if tp {
		fmt.Fprintln(os.Stderr, "== throughput")
		b.throughputRows(c)
	}
	if out {
		fmt.Fprintln(os.Stderr, "== large outputs")
		b.outputRows(c, c.nodes[0].id)
	}
	if mem {
		fmt.Fprintln(os.Stderr, "== memory after load")
		b.memoryRows(c, idle, memNode)
	}
	return nil
}

// kernel returns `uname -r` for the report.
func kernel() string {
	out, err := exec.Command("uname", "-sr").Output()
	if err != nil {
		return runtime.GOOS
	}
	return strings.TrimSpace(string(out))
}
