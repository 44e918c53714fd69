//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/testproc"
)

// nodeCPURows measures the CPU one exec of /bin/true through the gateway
// costs on the node (issue 39): in the node's own process, and in its
// children (the jail servers and the runs they fork, the reaper, the warm
// interpreters), beside the CPU of a bare spawn of the same file (its
// rusage) in the same run. The children's figure is the sum over the
// runner's live descendants of their own CPU and that of their waited
// children, plus the runner's waited children, before and after the
// execs: /proc's clock ticks, so it is an average over many execs.
func (b *bench) nodeCPURows(c *cluster, nodeID string) {
	sec := "Exec `true` round trip"
	var pid int
	for _, n := range c.nodes {
		if n.id == nodeID {
			pid = n.p.Cmd.Process.Pid
		}
	}
	if pid == 0 {
		b.add(row{section: sec, what: "CPU per exec in the node's children", err: fmt.Errorf("node %s is not one of the cluster's", nodeID)})
		return
	}
	ctx := context.Background()
	n := b.iters(400, 150)
	run := func() error {
		return c.exec(ctx, bridge.ExecParams{Command: "/bin/true", Host: "node", Node: nodeID, SessionKey: "bench-cpu"})
	}
	for i := 0; i < 5; i++ { // the jail and the warm processes stand
		if err := run(); err != nil {
			b.add(row{section: sec, what: "CPU per exec in the node's children", err: err})
			return
		}
	}
	// One exec through the node, then one bare spawn, per round: both see
	// the same load, as the latency rows do.
	own0, kids0 := treeCPU(pid)
	sw0 := map[string]int64{"node": testproc.ContextSwitches(pid), "gateway": testproc.ContextSwitches(c.gw.Cmd.Process.Pid), "servers": jailServerSwitches(pid)}
	var spawnCPU time.Duration
	for i := 0; i < n; i++ {
		if err := run(); err != nil {
			b.add(row{section: sec, what: "CPU per exec in the node's children", err: err})
			return
		}
		cmd := exec.Command("/bin/true")
		if err := cmd.Run(); err != nil {
			b.add(row{section: sec, what: "CPU of a bare spawn of /bin/true", err: err})
			return
		}
		spawnCPU += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	time.Sleep(200 * time.Millisecond) // the last runs are waited for
	own1, kids1 := treeCPU(pid)
	sw1 := map[string]int64{"node": testproc.ContextSwitches(pid), "gateway": testproc.ContextSwitches(c.gw.Cmd.Process.Pid), "servers": jailServerSwitches(pid)}
	per := func(ticks int64) float64 { return float64(ticks) * float64(clockTick) / float64(n) / 1e6 }
	base := sample{value: float64(spawnCPU) / float64(n) / 1e6, unit: "ms"}
	kids := sample{value: per(kids1 - kids0), unit: "ms"}
	b.add(row{section: sec, what: "CPU of a bare spawn of /bin/true (baseline)", s: base, note: fmt.Sprintf("user+sys of the child (rusage), mean of %d spawns, one after each exec below", n)})
	b.add(row{section: sec, what: "CPU per exec in the node's children", s: kids, baseline: &base, target: "≤ 1.5× baseline", met: metMax(kids.value/base.value, 1.5),
		note: fmt.Sprintf("host=node /bin/true, %d execs: utime+stime (+ waited children's) of every descendant of `exechost node run`, /proc clock ticks, mean per exec", n)})
	b.add(row{section: sec, what: "CPU per exec in the node's own process", s: sample{value: per(own1 - own0), unit: "ms"},
		note: "the same execs: utime+stime of `exechost node run` itself"})
	// Context switches are dear on a virtual machine and, unlike CPU
	// time, do not depend on the load: each figure is a count.
	for _, w := range []struct{ key, what, note string }{
		{"node", "context switches per exec in the node's own process", "the same execs: voluntary + involuntary switches of every thread of `exechost node run` (/proc/PID/task/*/status), mean per exec"},
		{"servers", "context switches per exec in the node's jail servers", "the same execs: every thread of each standing jail server (the node's children running --exechost-jail), mean per exec; the runs themselves are not counted"},
		{"gateway", "context switches per exec in the gateway", "the same execs: every thread of `exechost gateway`, which also served the agent, mean per exec"},
	} {
		b.add(row{section: sec, what: w.what, s: sample{value: float64(sw1[w.key]-sw0[w.key]) / float64(n), unit: "switches"}, note: w.note})
	}
}

// jailServerSwitches sums testproc.ContextSwitches over the node's children that are
// jail servers.
func jailServerSwitches(pid int) int64 {
	var n int64
	for _, ch := range childPIDs(pid) {
		if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", ch)); err == nil && bytes.Contains(cmd, []byte("--exechost-jail=")) {
			n += testproc.ContextSwitches(ch)
		}
	}
	return n
}

// treeCPU returns, in clock ticks, the CPU of pid itself and that of its
// children: the waited ones (pid's cutime+cstime) and every live
// descendant's own and waited-children CPU.
func treeCPU(pid int) (own, kids int64) {
	field := func(f []string, i int) int64 {
		if len(f) <= i {
			return 0
		}
		v, _ := strconv.ParseInt(f[i], 10, 64)
		return v
	}
	// statFields starts at the state (field 3): utime is field 14.
	f := statFields(pid)
	own = field(f, 11) + field(f, 12)
	kids = field(f, 13) + field(f, 14)
	var walk func(int)
	walk = func(p int) {
		for _, ch := range childPIDs(p) {
			g := statFields(ch)
			kids += field(g, 11) + field(g, 12) + field(g, 13) + field(g, 14)
			walk(ch)
		}
	}
	walk(pid)
	return own, kids
}
