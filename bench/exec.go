//go:build linux

package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/bwrap"
	"github.com/exechost/exechost/internal/sandbox/docker"
)

// op is one measured operation.
type op struct {
	name string
	how  string
	run  func() error
	skip error // set when the operation cannot run here
	// before, when set, runs untimed before each run (a warm process
	// made ready for it, so that its start is not counted).
	before func() error
	// baseline, when set, names the row this one is compared with.
	baseline string
}

// prepare runs o.before, when there is one.
func (o op) prepare() error {
	if o.before == nil {
		return nil
	}
	if err := o.before(); err != nil {
		return fmt.Errorf("before the run: %w", err)
	}
	return nil
}

// interleave runs every op once per round, n rounds after warm rounds, so
// each one and its baseline see the same machine load. It returns a
// sample per op (an op that fails is reported with its error).
func interleave(warm, n int, ops []op) ([]sample, []error) {
	errs := make([]error, len(ops))
	for i, o := range ops {
		errs[i] = o.skip
	}
	for r := 0; r < warm; r++ {
		for i, o := range ops {
			if errs[i] == nil {
				if err := o.prepare(); err != nil {
					errs[i] = err
				} else if err := o.run(); err != nil {
					errs[i] = fmt.Errorf("warm-up: %w", err)
				}
			}
		}
	}
	out := make([]sample, len(ops))
	for i, o := range ops {
		out[i] = sample{name: o.name, durs: make([]time.Duration, 0, n)}
	}
	for r := 0; r < n; r++ {
		for i, o := range ops {
			if errs[i] != nil {
				continue
			}
			if err := o.prepare(); err != nil {
				errs[i] = err
				continue
			}
			t0 := time.Now()
			err := o.run()
			d := time.Since(t0)
			if err != nil {
				errs[i] = err
				continue
			}
			out[i].durs = append(out[i].durs, d)
		}
	}
	return out, errs
}

// spawn runs argv to completion with os/exec: the baseline everything is
// compared with.
func spawn(argv ...string) func() error {
	return func() error { return exec.Command(argv[0], argv[1:]...).Run() }
}

// agentPace is the untimed gap before each agent-paced call: about what a
// daemon needs to have a warm process ready again (a start of this
// binary), and far less than an agent takes to read a result.
const agentPace = 50 * time.Millisecond

// pace waits agentPace (an op's untimed before).
func pace() error {
	time.Sleep(agentPace)
	return nil
}

// roundTripRows measures exec `true` through every path next to a direct
// spawn, interleaved.
func (b *bench) roundTripRows(c *cluster, nodeID string) {
	ctx := context.Background()
	sec := "Exec `true` round trip"
	ops := []op{
		{name: "direct spawn /bin/true (baseline)", how: "os/exec Run of /bin/true", run: spawn("/bin/true")},
		{name: "direct spawn /bin/sh -c /bin/true", how: "os/exec of sh -c (what command text costs)", run: spawn("/bin/sh", "-c", "/bin/true")},
		{name: "runner.Run", how: "runner.Run(Spec{Argv: [/bin/true]}): scrubbed env, pipes, process group", run: func() error {
			res, err := runner.Run(ctx, runner.Spec{Argv: []string{"/bin/true"}})
			if err == nil && !res.Success {
				err = fmt.Errorf("exit %d", res.ExitCode)
			}
			return err
		}},
		{name: "host=gateway (bridge client)", how: "agent bridge.Conn → `exechost gateway` → host.Engine (allowlist) → /bin/true started directly", run: func() error {
			return c.exec(ctx, bridge.ExecParams{Command: "/bin/true", Host: "gateway", SessionKey: "bench"})
		}},
		{name: "host=node over loopback (bridge client)", how: "agent → gateway → node.invoke → `exechost node run` (allowlist) → /bin/true started directly", run: func() error {
			return c.exec(ctx, bridge.ExecParams{Command: "/bin/true", Host: "node", Node: nodeID, SessionKey: "bench"})
		}},
		// An agent's calls come apart (it reads each result first): the
		// daemons' warm processes are ready again by the next one.
		{name: "host=gateway, agent-paced", how: "as host=gateway, each call " + fmtDur(agentPace) + " after the last (untimed): the confined start in a warm process", before: pace, run: func() error {
			return c.exec(ctx, bridge.ExecParams{Command: "/bin/true", Host: "gateway", SessionKey: "bench"})
		}},
		{name: "host=node, agent-paced", how: "as host=node, each call " + fmtDur(agentPace) + " after the last (untimed)", before: pace, run: func() error {
			return c.exec(ctx, bridge.ExecParams{Command: "/bin/true", Host: "node", Node: nodeID, SessionKey: "bench"})
		}},
	}
	// Apart from the rows above, with a spawn of their own as baseline: a
	// CLI start, a runtime exec or a fresh sandbox leaves the machine busy
	// (dockerd, runc, the shim, page cache) for milliseconds after it
	// returns, and a light row interleaved with it would time that
	// aftermath (bench/sandbox.go separates its rows the same way).
	cliExec := func() error {
		cmd := exec.Command(c.bin, "--state-dir", c.gwDir, "exec", "--gateway", c.url, "--host", "node", "--node", nodeID, "/bin/true")
		cmd.Env = append(os.Environ(), "EXECHOST_GATEWAY_TOKEN=")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	heavy := []op{
		{name: "direct spawn /bin/true (baseline of the rows below)", how: "os/exec Run of /bin/true, interleaved with the rows below", run: spawn("/bin/true")},
		{name: "host=node via CLI per call", how: "`exechost exec --host node --node ID /bin/true`: CLI start + dial + round trip", run: cliExec},
		{name: "host=node via CLI, agent-paced", how: "as above, each call " + fmtDur(agentPace) + " after the last (untimed)", before: pace, run: cliExec},
	}
	heavy = append(heavy, b.sandboxOps()...)
	warm, n := 3, b.iters(200, 30)
	// The targets: the overhead over a bare spawn measured beside it.
	over := map[string]time.Duration{ops[3].name: 300 * time.Microsecond, ops[4].name: time.Millisecond}
	// Issue 31's: a CLI call an agent makes, start to exit, in absolute terms.
	upTo := map[string]time.Duration{heavy[1].name: 4 * time.Millisecond, heavy[2].name: 4 * time.Millisecond}
	for _, group := range [][]op{ops, heavy} {
		samples, errs := interleave(warm, n, group)
		base := samples[0]
		for i, o := range group {
			r := row{section: sec, what: o.name, s: samples[i], note: o.how}
			if i > 0 {
				r.baseline = &base
			}
			if errs[i] != nil {
				r.err = errs[i]
			}
			if d, ok := over[o.name]; ok {
				r.target = "≤ spawn p50 + " + fmtDur(d)
				r.met = metDur(samples[i].pct(0.5), base.pct(0.5)+d, errs[i])
			}
			if d, ok := upTo[o.name]; ok {
				r.target = "≤ " + fmtDur(d) + " p50"
				r.met = metDur(samples[i].pct(0.5), d, errs[i])
			}
			b.add(r)
		}
	}
	b.nodeCPURows(c, nodeID)
}

// sandboxOps returns the Docker API, docker exec CLI and bwrap operations,
// each with a skip reason when the backend does not work here.
func (b *bench) sandboxOps() []op {
	ctx := context.Background()
	dockerAPI := op{name: "host=sandbox via Docker API", how: "sandbox/docker Backend.Exec(Argv [/bin/true]) in a kept session container"}
	dockerCLI := op{name: "`docker exec` CLI", how: "`docker exec <same container> /bin/true`"}
	bw := op{name: "daemonless sandbox (bwrap)", how: "sandbox/bwrap Backend.Exec(Argv [/bin/true]): fresh namespaces per command"}

	cfg := sandbox.Config{Backend: docker.Name, Agent: sandbox.AgentOff} // per-command rows; bench/sandbox.go has the agent
	cfg = docker.With(cfg, func(d *docker.Config) {
		d.Image = cmp.Or(os.Getenv("EXECHOST_BENCH_IMAGE"), "exechost-sandbox-test:busybox")
	})
	cfg = cfg.WithDefaults()
	stateDir := filepath.Join(b.tmp, "sandbox-state")
	_ = os.MkdirAll(stateDir, 0o700)
	octx, cancel := context.WithTimeout(ctx, 20*time.Second)
	db, err := docker.Open(octx, cfg, stateDir)
	cancel()
	if err != nil {
		dockerAPI.skip = fmt.Errorf("%w: %v (image %s; build it with `go test ./internal/sandbox/docker/` or set EXECHOST_BENCH_IMAGE)", errSkip, err, docker.ConfigOf(cfg).Image)
		dockerCLI.skip = dockerAPI.skip
	} else {
		b.cleanup = append(b.cleanup, func() {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = db.Close(cctx)
		})
		req := sandbox.Request{SessionKey: "bench", AgentID: "bench", Argv: []string{"/bin/true"}, Timeout: time.Minute}
		dockerAPI.run = func() error {
			res, err := db.Exec(ctx, req)
			if err == nil && !res.Success {
				err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Error)
			}
			return err
		}
		// The first Exec creates the session container; docker exec
		// then targets that same container.
		if err := dockerAPI.run(); err != nil {
			dockerAPI.skip = fmt.Errorf("first exec: %w", err)
			dockerCLI.skip = dockerAPI.skip
		} else if id, err := benchContainer(docker.OwnerID(stateDir)); err != nil {
			dockerCLI.skip = err
		} else {
			dockerCLI.how = "`docker exec " + id[:12] + " /bin/true` (the session container above)"
			dockerCLI.run = spawn("docker", "exec", id, "/bin/true")
		}
	}
	bcfg := sandbox.Config{Backend: bwrap.Name, Agent: sandbox.AgentOff}.WithDefaults()
	octx, cancel = context.WithTimeout(ctx, 20*time.Second)
	bb, err := bwrap.Open(octx, bcfg, stateDir)
	cancel()
	if err != nil {
		bw.skip = fmt.Errorf("%w: %v", errSkip, err)
	} else {
		b.cleanup = append(b.cleanup, func() { _ = bb.Close(context.Background()) })
		req := sandbox.Request{SessionKey: "bench", AgentID: "bench", Argv: []string{"/bin/true"}, Timeout: time.Minute}
		bw.run = func() error {
			res, err := bb.Exec(ctx, req)
			if err == nil && !res.Success {
				err = fmt.Errorf("exit %d: %s %s", res.ExitCode, res.Error, res.Stderr)
			}
			return err
		}
	}
	if _, err := exec.LookPath("docker"); err != nil && dockerCLI.skip == nil {
		dockerCLI.skip = fmt.Errorf("%w: no docker CLI in PATH", errSkip)
	}
	return []op{dockerAPI, dockerCLI, bw}
}

// benchContainer finds the running container the docker backend created
// for the bench session (the newest one with this state directory's owner label).
func benchContainer(owner string) (string, error) {
	out, err := exec.Command("docker", "ps", "-q", "--no-trunc", "--filter", "label="+docker.LabelOwner+"="+owner, "--latest").Output()
	if err != nil {
		return "", fmt.Errorf("%w: docker ps: %v", errSkip, err)
	}
	id := strings.TrimSpace(string(out))
	if len(id) < 12 {
		return "", fmt.Errorf("%w: the session container is not listed by docker ps", errSkip)
	}
	return id, nil
}
