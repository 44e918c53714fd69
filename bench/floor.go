//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The start-up floor (issue 42): the same tree built without the
// Kubernetes driver and without the OpenTelemetry SDK and exporter, so
// that `exechost version` and the re-exec entry points can be measured
// beside what they cost before those were linked. It is built with
// `go build -overlay` from files this bench writes, never with build tags
// in the shipped packages: the shipped binary has one import graph.

// floorTrace replaces internal/trace: the same API, tracing always off,
// importing only OpenTelemetry's API packages its callers name (attribute,
// trace), not the SDK, semconv or the exporter.
const floorTrace = `package trace

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	oteltrace "go.opentelemetry.io/otel/trace"
)

const ScopeName = "github.com/exechost/exechost"
const SpanExec = "exechost.exec"

const (
	AttrRunID         = attribute.Key("exechost.run_id")
	AttrHost          = attribute.Key("exechost.host")
	AttrNodeID        = attribute.Key("exechost.node_id")
	AttrAgentID       = attribute.Key("exechost.agent_id")
	AttrCommandSHA256 = attribute.Key("exechost.command.sha256")
	AttrStatus        = attribute.Key("exechost.status")
	AttrTimedOut      = attribute.Key("exechost.timed_out")
	AttrOutputBytes   = attribute.Key("exechost.output.bytes")
	AttrDecision      = attribute.Key("exechost.decision")
)

const (
	EventReceived     = "exechost.received"
	EventPlaced       = "exechost.placed"
	EventApprovalWait = "exechost.approval.wait"
	EventApprovalDone = "exechost.approval.answered"
	EventHostRun      = "exechost.host.run"
	EventHostFinished = "exechost.host.finished"
)

type Options struct {
	Endpoint string
	Version  string
	Exporter any
	Getenv   func(string) string
}

type Tracer struct{}

func Enabled(Options) bool                                            { return false }
func New(context.Context, Options) (*Tracer, error)                   { return nil, nil }
func (t *Tracer) Shutdown(context.Context) error                      { return nil }
func Parent(ctx context.Context, _, _ string) context.Context         { return ctx }
func Event(context.Context, string, ...attribute.KeyValue)            {}
func EndExec(oteltrace.Span, Result)                                  {}

type Exec struct {
	RunID, Host, AgentID, CommandSHA256 string
	Traceparent, Tracestate             string
	Start                               time.Time
}

func (t *Tracer) StartExec(ctx context.Context, _ Exec) (context.Context, oteltrace.Span) {
	return ctx, nil
}

type Result struct {
	RunID, NodeID, Status string
	ExitCode              *int
	TimedOut              bool
	OutputBytes           int
	ErrorType             string
}
`

// buildFloor builds the floor binary at out from the tree in the current
// directory: the Kubernetes driver's files other than image.go (the
// agent image builder, which links no Kubernetes package) are removed from
// the build, with the import that registers the driver, and internal/trace
// is floorTrace.
func buildFloor(tmp, out string) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	replace := map[string]string{}
	k8s := filepath.Join(root, "internal", "sandbox", "kubernetes")
	files, err := filepath.Glob(filepath.Join(k8s, "*.go"))
	if err != nil {
		return err
	}
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") && filepath.Base(f) != "image.go" {
			replace[f] = ""
		}
	}
	dir := filepath.Join(tmp, "floor-overlay")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	write := func(orig, name, text string) error {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			return err
		}
		replace[orig] = p
		return nil
	}
	// The one name image.go takes from the removed files.
	if err := write(filepath.Join(k8s, "floor_image.go"), "floor_image.go", "package kubernetes\n\nconst imageAgentPath = \"/exechost\"\n"); err != nil {
		return err
	}
	pick := filepath.Join(root, "internal", "sandbox", "pick", "pick.go")
	src, err := os.ReadFile(pick)
	if err != nil {
		return err
	}
	imp := "\t_ \"github.com/exechost/exechost/internal/sandbox/kubernetes\"\n"
	if !strings.Contains(string(src), imp) {
		return fmt.Errorf("floor build: %s no longer imports the Kubernetes driver as the overlay expects", pick)
	}
	if err := write(pick, "pick.go", strings.Replace(string(src), imp, "", 1)); err != nil {
		return err
	}
	trace := filepath.Join(root, "internal", "trace")
	tfiles, err := filepath.Glob(filepath.Join(trace, "*.go"))
	if err != nil {
		return err
	}
	for _, f := range tfiles {
		if !strings.HasSuffix(f, "_test.go") {
			replace[f] = ""
		}
	}
	if err := write(filepath.Join(trace, "trace.go"), "trace.go", floorTrace); err != nil {
		return err
	}
	js, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		return err
	}
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, js, 0o600); err != nil {
		return err
	}
	build := exec.Command("go", "build", "-trimpath", "-overlay", ov, "-o", out, "./cmd/exechost")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if o, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build the floor binary: %w: %s", err, o)
	}
	// The overlay must have taken: the floor links no Kubernetes package.
	deps, err := exec.Command("go", "version", "-m", out).Output()
	if err != nil {
		return fmt.Errorf("go version -m %s: %w", out, err)
	}
	// (The driver's YAML package is linked by nothing else.)
	if strings.Contains(string(deps), "k8s.io/") || strings.Contains(string(deps), "github.com/goccy/go-yaml") || strings.Contains(string(deps), "go.opentelemetry.io/otel/sdk") {
		return fmt.Errorf("floor build: %s still links the Kubernetes driver or the OpenTelemetry SDK", out)
	}
	return nil
}

// startOnce is one start of a binary: wall time and CPU (user+sys) of
// the process, from its rusage.
func startOnce(argv []string, wantCode int) (wall, cpu time.Duration, err error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	t0 := time.Now()
	err = cmd.Run()
	wall = time.Since(t0)
	if cmd.ProcessState == nil {
		return 0, 0, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	if code := cmd.ProcessState.ExitCode(); code != wantCode {
		return 0, 0, fmt.Errorf("%s: exit %d, want %d: %v", strings.Join(argv, " "), code, wantCode, err)
	}
	return wall, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}

// floorRows measures the binary's start-up beside the floor build of the
// same tree (buildFloor): `exechost version` and the three re-exec entry
// points a daemon starts per run or per confinement, each as wall time
// and as the process's CPU (user+sys), the two builds alternating so both
// see the same load; then package-init allocations and binary size.
func (b *bench) floorRows() {
	sec := "Start-up beside the floor build (issue 42)"
	floor := filepath.Join(b.tmp, "exechost-floor")
	fmt.Fprintln(os.Stderr, "building the floor: ./cmd/exechost without the Kubernetes driver and the OpenTelemetry SDK (go build -overlay)")
	if err := buildFloor(b.tmp, floor); err != nil {
		b.add(row{section: sec, what: "`exechost version`", err: err})
		return
	}
	// The entry points are started with no arguments: each reaches its
	// entry point (after the package inits that precede it) and exits 2
	// with its usage, so the figure is the start-up a real start pays
	// before its own work.
	entries := []struct {
		what string
		args []string
		code int
	}{
		{"`exechost version`", []string{"version"}, 0},
		{"launcher start (`--exechost-confine=v1`)", []string{"--exechost-confine=v1"}, 2},
		{"interpreter start (`--exechost-interp=v1`)", []string{"--exechost-interp=v1"}, 2},
		{"jail server start (`--exechost-jail=v1`)", []string{"--exechost-jail=v1"}, 2},
	}
	n := b.iters(100, 50)
	for _, e := range entries {
		var wall, cpu [2]sample // 0: floor, 1: this binary
		var err error
		for i := 0; i < n+3 && err == nil; i++ {
			for k := range 2 {
				which := (i + k) % 2 // alternate which goes first
				bin := floor
				if which == 1 {
					bin = b.bin
				}
				w, c, e2 := startOnce(append([]string{bin}, e.args...), e.code)
				if e2 != nil {
					err = e2
					break
				}
				if i >= 3 { // 3 warm-up rounds
					wall[which].durs = append(wall[which].durs, w)
					cpu[which].durs = append(cpu[which].durs, c)
				}
			}
		}
		b.add(row{section: sec, what: e.what + " wall, floor build (baseline)", s: wall[0], err: err, note: "the same tree without the Kubernetes driver and the OpenTelemetry SDK (bench/floor.go: go build -overlay)"})
		b.add(row{section: sec, what: e.what + " wall", s: wall[1], baseline: &wall[0], err: err, target: "≤ 1.05× floor p50", met: metRatio(wall[1], wall[0], 1.05, err),
			note: fmt.Sprintf("%d starts of each build, alternating", n)})
		b.add(row{section: sec, what: e.what + " CPU, floor build (baseline)", s: cpu[0], err: err, note: "user+sys of the process (rusage)"})
		b.add(row{section: sec, what: e.what + " CPU", s: cpu[1], baseline: &cpu[0], err: err, target: "≤ 1.05× floor p50", met: metRatio(cpu[1], cpu[0], 1.05, err),
			note: "user+sys of the process (rusage), same starts"})
	}
	var inits [2]sample
	var initErr error
	for k, bin := range []string{floor, b.bin} {
		kb, allocs, err := initAllocs(bin)
		if err != nil {
			initErr = err
			continue
		}
		inits[k] = sample{value: kb, unit: "kB"}
		if k == 1 {
			b.add(row{section: sec, what: "package-init allocation, floor build (baseline)", s: inits[0], err: initErr, note: "GODEBUG=inittrace=1 exechost version: the init lines' bytes summed"})
			b.add(row{section: sec, what: fmt.Sprintf("package-init allocation (%d allocs)", allocs), s: inits[1], baseline: &inits[0], err: initErr, note: "the same for this binary"})
		}
	}
	var size [2]sample
	for k, bin := range []string{floor, b.bin} {
		fi, err := os.Stat(bin)
		if err != nil {
			b.add(row{section: sec, what: "binary size", err: err})
			return
		}
		size[k] = sample{value: float64(fi.Size()) / 1e6, unit: "MB"}
	}
	b.add(row{section: sec, what: "binary size, floor build (baseline)", s: size[0], note: "CGO_ENABLED=0 go build -trimpath -overlay …"})
	b.add(row{section: sec, what: "binary size", s: size[1], baseline: &size[0], target: "≤ +25 MB", met: metMax(size[1].value-size[0].value, 25),
		note: "CGO_ENABLED=0 go build -trimpath ./cmd/exechost"})
}

// initAllocs sums the bytes (kB) and allocations the package inits of
// `bin version` report under GODEBUG=inittrace=1.
func initAllocs(bin string) (kb float64, allocs int, err error) {
	cmd := exec.Command(bin, "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("%s version: %w", bin, err)
	}
	var bytes int
	for _, line := range strings.Split(string(out), "\n") {
		// init pkg @0.5 ms, 0.02 ms clock, 1234 bytes, 5 allocs
		var pkg string
		var at, clock float64
		var by, al int
		if _, err := fmt.Sscanf(line, "init %s @%f ms, %f ms clock, %d bytes, %d allocs", &pkg, &at, &clock, &by, &al); err == nil {
			bytes += by
			allocs += al
		}
	}
	if allocs == 0 {
		return 0, 0, fmt.Errorf("%s version printed no init trace", bin)
	}
	return float64(bytes) / 1024, allocs, nil
}
