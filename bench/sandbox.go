//go:build linux

package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/bwrap"
	"github.com/exechost/exechost/internal/sandbox/docker"
)

// Sandbox targets from issue 15: a warm Docker sandbox runs `true` in at
// most 5 ms and at least 10× faster than the `docker exec` CLI; the
// daemonless sandbox in at most 3 ms.
const (
	targetDockerAgent     = 5 * time.Millisecond
	targetDockerAgentGain = 10
	targetBwrapAgent      = 3 * time.Millisecond
)

// sandboxBackend opens a backend over a fresh state directory for the
// sandbox rows, closed at the end of the run, or returns why it cannot run
// here.
func (b *bench) sandboxBackend(cfg sandbox.Config, open func(context.Context, sandbox.Config, string) (sandbox.Backend, error)) (sandbox.Backend, string, error) {
	stateDir, err := os.MkdirTemp(b.tmp, "sandbox-")
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	be, err := open(ctx, cfg, stateDir)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", errSkip, err)
	}
	b.cleanup = append(b.cleanup, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = be.Close(cctx)
	})
	return be, stateDir, nil
}

// execTrue returns an op running /bin/true in be's warm session sandbox.
func execTrue(be sandbox.Backend) func() error {
	req := sandbox.Request{SessionKey: "bench", AgentID: "bench", Argv: []string{"/bin/true"}, Timeout: time.Minute}
	return func() error {
		res, err := be.Exec(context.Background(), req)
		if err == nil && !res.Success {
			err = fmt.Errorf("exit %d: %s %s", res.ExitCode, res.Error, res.Stderr)
		}
		return err
	}
}

// sandboxRows measures exec `true` in a warm sandbox through the resident
// agent next to each per-command path it replaces, in the same run:
// Docker's Engine API exec and the `docker exec` CLI (into the same
// container as the API row), and a fresh bwrap sandbox per command.
func (b *bench) sandboxRows() {
	sec := "Sandbox exec `true`: resident agent vs a container runtime per command"
	dcfg := sandbox.Config{Backend: docker.Name, AgentBinary: b.bin}
	dcfg = docker.With(dcfg, func(d *docker.Config) {
		d.Image = cmp.Or(os.Getenv("EXECHOST_BENCH_IMAGE"), "exechost-sandbox-test:busybox")
	})
	dcfg = dcfg.WithDefaults()
	dexec := dcfg
	dexec.Agent = sandbox.AgentOff
	bcfg := sandbox.Config{Backend: bwrap.Name, AgentBinary: b.bin}.WithDefaults()
	bfresh := bcfg
	bfresh.Agent = sandbox.AgentOff
	openDocker := func(ctx context.Context, c sandbox.Config, dir string) (sandbox.Backend, error) {
		be, err := docker.Open(ctx, c, dir)
		if err != nil {
			return nil, fmt.Errorf("%v (image %s: build it with `go test ./internal/sandbox/docker/` or set EXECHOST_BENCH_IMAGE)", err, docker.ConfigOf(c).Image)
		}
		if err := be.AgentErr(); c.Agent != sandbox.AgentOff && err != nil {
			be.Close(ctx)
			return nil, fmt.Errorf("agent unavailable: %v", err)
		}
		return be, nil
	}
	openBwrap := func(ctx context.Context, c sandbox.Config, dir string) (sandbox.Backend, error) {
		be, err := bwrap.Open(ctx, c, dir)
		if err != nil {
			return nil, err
		}
		if err := be.AgentErr(); c.Agent != sandbox.AgentOff && err != nil {
			be.Close(ctx)
			return nil, fmt.Errorf("agent unavailable: %v", err)
		}
		return be, nil
	}

	ops := []op{
		{name: "spawn /bin/true (floor)", how: "os/exec Run of /bin/true on the host (interleaved with the agent rows)", run: spawn("/bin/true")},
		{name: "`docker exec` CLI (baseline)", how: "`docker exec <the Engine API row's container> /bin/true`"},
		{name: "Docker, Engine API exec per command", how: "sandbox/docker with sandbox.agent=off: exec create + attach + inspect (runc exec)"},
		{name: "Docker, resident agent", how: "sandbox/docker with the agent as the container's pid 1 (static exechost, mounted read-only), over the attached stdio"},
		{name: "bwrap, fresh sandbox per command (baseline)", how: "sandbox/bwrap with sandbox.agent=off: bwrap + helper + command"},
		{name: "bwrap, resident agent", how: "sandbox/bwrap with one sandbox per session whose agent forks the command"},
	}
	if be, dir, err := b.sandboxBackend(dexec, openDocker); err != nil {
		ops[1].skip, ops[2].skip = err, err
	} else {
		ops[2].run = execTrue(be)
		// The first command creates the session container, which the
		// CLI row then targets too.
		if err := ops[2].run(); err != nil {
			ops[1].skip, ops[2].skip = fmt.Errorf("first exec: %w", err), fmt.Errorf("first exec: %w", err)
		} else if id, err := benchContainer(docker.OwnerID(dir)); err != nil {
			ops[1].skip = err
		} else {
			ops[1].run = spawn("docker", "exec", id, "/bin/true")
		}
	}
	for i, c := range map[int]sandbox.Config{3: dcfg, 4: bfresh, 5: bcfg} {
		open := openBwrap
		if i == 3 {
			open = openDocker
		}
		if be, _, err := b.sandboxBackend(c, open); err != nil {
			ops[i].skip = err
		} else {
			ops[i].run = execTrue(be)
		}
	}
	// Two interleaved groups in the same run: the per-command runtime
	// paths, and the agents next to the bare spawn. A runtime exec leaves
	// runc, the shim and dockerd busy for milliseconds after it returns;
	// interleaved with it, an agent row would time that aftermath rather
	// than itself (a gateway using the agent runs no runtime exec).
	heavy := []int{1, 2, 4}
	light := []int{0, 3, 5}
	s := make([]sample, len(ops))
	errs := make([]error, len(ops))
	for _, group := range [][]int{heavy, light} {
		var gops []op
		for _, i := range group {
			gops = append(gops, ops[i])
		}
		gs, gerrs := interleave(3, b.iters(200, 30), gops)
		for j, i := range group {
			s[i], errs[i] = gs[j], gerrs[j]
		}
	}
	b.add(row{section: sec, what: ops[0].name, s: s[0], note: ops[0].how, err: errs[0]})
	b.add(row{section: sec, what: ops[1].name, s: s[1], baseline: &s[0], note: ops[1].how, err: errs[1]})
	b.add(row{section: sec, what: ops[2].name, s: s[2], baseline: &s[1], note: ops[2].how, err: errs[2]})
	dockerMet := metDur(s[3].pct(0.5), targetDockerAgent, errs[3])
	if dockerMet == "yes" && (errs[1] != nil || s[3].pct(0.5)*targetDockerAgentGain > s[1].pct(0.5)) {
		dockerMet = "no"
		if errs[1] != nil {
			dockerMet = "n/a"
		}
	}
	b.add(row{section: sec, what: ops[3].name, s: s[3], baseline: &s[1], note: ops[3].how, err: errs[3],
		target: fmt.Sprintf("≤ %s p50 and ≥ %d× faster than `docker exec`", targetDockerAgent, targetDockerAgentGain), met: dockerMet})
	b.add(row{section: sec, what: ops[4].name, s: s[4], baseline: &s[0], note: ops[4].how, err: errs[4]})
	b.add(row{section: sec, what: ops[5].name, s: s[5], baseline: &s[4], note: ops[5].how, err: errs[5],
		target: fmt.Sprintf("≤ %s p50", targetBwrapAgent), met: metDur(s[5].pct(0.5), targetBwrapAgent, errs[5])})
	if dockerMet == "no" || b.alwaysProfile && errs[3] == nil {
		b.cpuProfile("Docker resident agent exec (gateway side)", 3*time.Second, ops[3].run)
	}
	if s5 := s[5].pct(0.5); errs[5] == nil && (s5 > targetBwrapAgent || b.alwaysProfile) {
		b.cpuProfile("bwrap resident agent exec (gateway side)", 3*time.Second, ops[5].run)
	}
}
