//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"golang.org/x/time/rate"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/approverui"
	"github.com/exechost/exechost/internal/asksock"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
)

// microRows measures the decision engine, output capping and the approval
// socket, each next to its baseline.
func (b *bench) microRows() {
	b.decisionRows()
	b.pinRows()
	b.interpRows()
	b.floodRows()
	b.approvalRows()
}

// decisionRows: host.Engine.Prepare (cached approvals, a 5-segment command,
// 1,000 allowlist patterns) interleaved with a spawn of /bin/true.
func (b *bench) decisionRows() {
	sec := "Decision engine (1,000-pattern allowlist, 5-segment command)"
	dir := filepath.Join(b.tmp, "decision")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.add(row{section: sec, what: "host.Engine.Prepare", err: err})
		return
	}
	_, err := approvals.NewStore(dir).Update(func(f *approvals.File) error {
		f.Defaults.Security, f.Defaults.Ask = "allowlist", "off"
		for i := 0; i < 996; i++ {
			if i%2 == 0 {
				f.AddPattern("*", fmt.Sprintf("/opt/tool%d/bin/*", i))
			} else {
				f.AddPattern("*", fmt.Sprintf("/usr/local/lib/pkg%d/bin/run", i))
			}
		}
		for _, p := range []string{"/usr/bin/git", "/usr/bin/grep", "/usr/bin/sort", "/usr/bin/uniq"} {
			f.AddPattern("*", p)
		}
		return nil
	})
	if err != nil {
		b.add(row{section: sec, what: "host.Engine.Prepare", err: err})
		return
	}
	// The steady state of a file not being edited. (Where the file cannot
	// be watched, the engine reloads a just-written one on every decision
	// for 2 s, as a same-tick edit could not be told apart from it.)
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(approvals.NewStore(dir).Path, old, old); err != nil {
		b.add(row{section: sec, what: "host.Engine.Prepare", err: err})
		return
	}
	e := host.NewEngine(dir, policy.HostGateway, "gw")
	e.PATH = "/usr/local/bin:/usr/bin:/bin"
	req := host.Request{RawCommand: "cd /tmp && git status | grep -v x | sort | uniq -c", Cwd: dir}
	prepare := func() error {
		p, err := e.Prepare(req)
		if err == nil && p.Decision.Outcome != policy.Allow {
			err = fmt.Errorf("decision %+v, want allow", p.Decision)
		}
		return err
	}
	// A busy host rewrites its file every UsageFlushDelay (lastUsedAt
	// stamps): the decision right after a rewrite re-reads it.
	fresh := host.NewEngine(dir, policy.HostGateway, "gw")
	fresh.PATH = e.PATH
	store := approvals.NewStore(dir)
	raw, err := os.ReadFile(store.Path)
	if err != nil {
		b.add(row{section: sec, what: "host.Engine.Prepare", err: err})
		return
	}
	// A text the engine has not seen: the memo and the parse cache miss,
	// as for an agent's first command of a kind; the fact cache answers
	// the paths earlier texts read, as on any host that has run a command.
	seen := 0
	firstSeen := func() error {
		seen++
		p, err := e.Prepare(host.Request{RawCommand: fmt.Sprintf("cd /tmp && git status | grep -v x%d | sort | uniq -c", seen), Cwd: dir})
		if err == nil && p.Decision.Outcome != policy.Allow {
			err = fmt.Errorf("decision %+v, want allow", p.Decision)
		}
		return err
	}
	ops := []op{
		{name: "spawn /bin/true (baseline)", how: "os/exec Run", run: spawn("/bin/true")},
		{name: "host.Engine.Prepare", how: "analyse + resolve + match 1,000 patterns + decide, `" + req.RawCommand + "` (the same text again: the engine's caches)", run: prepare},
		{name: "host.Engine.Prepare, first-seen text", how: "the same command with a new word each time: the memo and the parse cache miss (the fact cache answers the paths earlier texts read)", run: firstSeen},
	}
	s, errs := interleave(50, b.iters(2000, 300), ops)
	b.add(row{section: sec, what: ops[0].name, s: s[0], note: ops[0].how, err: errs[0]})
	b.add(row{section: sec, what: ops[1].name, s: s[1], baseline: &s[0], note: ops[1].how, err: errs[1],
		target: "≤ 20 µs p50", met: metDur(s[1].pct(0.5), 20*time.Microsecond, errs[1])})
	b.add(row{section: sec, what: ops[2].name, s: s[2], baseline: &s[0], note: ops[2].how, err: errs[2],
		target: "≤ 50 µs p50", met: metDur(s[2].pct(0.5), 50*time.Microsecond, errs[2])})
	// Apart, so the parse's garbage does not weigh on the rows above.
	fops := []op{
		{name: "parse + compile the file (replaced per-decision cost)", how: "approvals Store.Load + ResolvePolicy + CompileAllowlist of the 1,000 patterns: what each decision on a fresh file cost before the byte comparison", run: func() error {
			f, err := store.Load()
			if err == nil {
				policy.CompileAllowlist(f.ResolvePolicy("main").Patterns(), "")
			}
			return err
		}},
	}
	fs, ferrs := interleave(5, b.iters(300, 50), fops)
	b.add(row{section: sec, what: fops[0].name, s: fs[0], note: fops[0].how, err: ferrs[0]})
	// The rewrite itself is not timed: each round replaces the file with
	// the same bytes (write + rename, as a usage flush does), then times
	// the decision that follows.
	rewritten := sample{name: "host.Engine.Prepare, file just rewritten"}
	var rerr error
	for i := 0; i < b.iters(300, 50)+5 && rerr == nil; i++ {
		if rerr = os.WriteFile(store.Path+".bench", raw, 0o600); rerr == nil {
			rerr = os.Rename(store.Path+".bench", store.Path)
		}
		t0 := time.Now()
		p, err := fresh.Prepare(req)
		d := time.Since(t0)
		if err == nil && p.Decision.Outcome != policy.Allow {
			err = fmt.Errorf("decision %+v, want allow", p.Decision)
		}
		if rerr == nil {
			rerr = err
		}
		if i >= 5 {
			rewritten.durs = append(rewritten.durs, d)
		}
	}
	b.add(row{section: sec, what: rewritten.name, s: rewritten, baseline: &fs[0], err: rerr,
		note: "as above, right after exec-approvals.json was replaced with the same bytes (a busy host's usage stamps): the watch reports the change, the file is read again and compared byte for byte"})
	if errs[1] == nil && (s[1].pct(0.5) > 20*time.Microsecond || b.alwaysProfile) {
		b.cpuProfile("host.Engine.Prepare (decision target missed)", 3*time.Second, prepare)
	}
	if errs[2] == nil && (s[2].pct(0.5) > 50*time.Microsecond || b.alwaysProfile) {
		b.cpuProfile("host.Engine.Prepare, first-seen text (decision target missed)", 3*time.Second, firstSeen)
	}
}

// metDur says whether d meets limit.
func metDur(d, limit time.Duration, err error) string {
	switch {
	case err != nil:
		return "n/a"
	case d <= limit:
		return "yes"
	default:
		return "no"
	}
}

// floodBytes is the output flood: 1 GiB.
const floodBytes = 1 << 30

// floodRows: runner.Run capturing a 1 GiB flood (in a re-executed helper
// process, so its peak RSS is its own) against `head | cat > /dev/null`
// and a Go process copying the flood into a counting writer.
func (b *bench) floodRows() {
	sec := "Output capping (1 GiB flood on stdout)"
	exe, err := os.Executable()
	if err != nil {
		b.add(row{section: sec, what: "runner.Run + Capture", err: err})
		return
	}
	type result struct {
		secs  float64
		rssKB int64
	}
	kinds := []struct{ name, how string }{
		{"`head -c 1GiB /dev/zero | cat > /dev/null` (baseline)", "head and cat as two processes joined by a pipe; peak RSS is cat's VmHWM, sampled every 20 ms"},
		{"Go os/exec into a counting writer", "re-executed bench binary, the floor any Go reader pays"},
		{"runner.Run + Capture", "re-executed bench binary running runner.Run(head -c 1GiB /dev/zero); keeps 200,000 bytes"},
	}
	run := func(i int) (result, error) {
		t0 := time.Now()
		if i == 0 {
			kb, err := catPipeline()
			return result{secs: time.Since(t0).Seconds(), rssKB: kb}, err
		}
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), helperEnv+"="+[]string{"", "flood-discard", "flood-capture"}[i])
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		secs := time.Since(t0).Seconds()
		if err != nil {
			return result{}, fmt.Errorf("%w: %s", err, out)
		}
		var kb int64
		if _, err := fmt.Sscan(string(out), &kb); err != nil {
			return result{}, fmt.Errorf("helper printed %q: %w", out, err)
		}
		return result{secs: secs, rssKB: kb}, nil
	}
	n := b.iters(3, 1)
	secs := make([]float64, len(kinds))
	rss := make([]int64, len(kinds))
	errs := make([]error, len(kinds))
	for round := 0; round < n; round++ {
		for i := range kinds {
			if errs[i] != nil {
				continue
			}
			r, err := run(i)
			if err != nil {
				errs[i] = err
				continue
			}
			secs[i] += r.secs
			rss[i] = max(rss[i], r.rssKB)
		}
	}
	mbps := func(i int) sample {
		return sample{value: float64(n) * floodBytes / 1e6 / secs[i], unit: "MB/s", better: +1}
	}
	base := mbps(0)
	baseRSS := sample{value: float64(rss[0]) / 1024, unit: "MB peak RSS"}
	for i, k := range kinds {
		s := mbps(i)
		r := row{section: sec, what: k.name + " throughput", s: s, note: k.how + " (whole process, start to exit)", err: errs[i]}
		if i > 0 {
			r.baseline = &base
		}
		b.add(r)
		rr := row{section: sec, what: k.name + " peak RSS", s: sample{value: float64(rss[i]) / 1024, unit: "MB peak RSS"}, err: errs[i],
			note: "VmHWM of the process reading the flood"}
		if i > 0 {
			rr.baseline = &baseRSS
		}
		b.add(rr)
	}
}

// approvalRows: one prompt through the approval socket (dial, hello,
// signed request, broker, auto-decide, signed decision) against a unix
// socket echo with a dial per round trip, interleaved.
func (b *bench) approvalRows() {
	sec := "Approval socket round trip"
	dir, err := os.MkdirTemp("", "ehap-")
	if err != nil {
		b.add(row{section: sec, what: "approver prompt", err: err})
		return
	}
	defer os.RemoveAll(dir)
	token := []byte(approvals.NewToken())
	br := prompt.NewBroker()
	srv := &asksock.Server{Path: filepath.Join(dir, "exec-approvals.sock"), Token: token, Broker: br, Rate: rate.Inf}
	if err := srv.Listen(); err != nil {
		b.add(row{section: sec, what: "approver prompt", err: err})
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = srv.Serve(ctx) }()
	go approverui.AutoDecide(ctx, br, policy.AllowOnce, "bench")
	client := &asksock.Client{SocketPath: srv.Path, Token: token}
	req := prompt.Request{
		Command: "ls -la", Argv: []string{"ls", "-la"}, Cwd: "/tmp", Host: "gateway",
		Security: "allowlist", Ask: "on-miss", AgentID: "main", SessionKey: "s1",
		ResolvedPaths: []string{"/usr/bin/ls"}, Allowlisted: []bool{false}, Reason: "allowlist-miss",
	}

	echoPath := filepath.Join(dir, "echo.sock")
	ln, err := net.Listen("unix", echoPath)
	if err != nil {
		b.add(row{section: sec, what: "approver prompt", err: err})
		return
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadBytes('\n')
					if err != nil {
						return
					}
					if _, err := c.Write(line); err != nil {
						return
					}
				}
			}()
		}
	}()
	msg := []byte(`{"type":"request","id":"0123456789abcdef","ts":0,"nonce":"00","request":{"command":"ls -la"},"hmac":"00"}` + "\n")
	ops := []op{
		{name: "unix socket echo, dial per round trip (baseline)", how: "dial + one line written and read back + close", run: func() error {
			c, err := net.Dial("unix", echoPath)
			if err != nil {
				return err
			}
			defer c.Close()
			if _, err := c.Write(msg); err != nil {
				return err
			}
			_, err = bufio.NewReader(c).ReadBytes('\n')
			return err
		}},
		{name: "approver prompt (allow-once)", how: "asksock.Client.Prompt → in-process asksock.Server (rate limit off) → AutoDecide", run: func() error {
			a, _, err := client.Prompt(ctx, req)
			if err == nil && a != policy.AllowOnce {
				err = fmt.Errorf("decision %q", a)
			}
			return err
		}},
	}
	s, errs := interleave(20, b.iters(1000, 200), ops)
	b.add(row{section: sec, what: ops[0].name, s: s[0], note: ops[0].how, err: errs[0]})
	b.add(row{section: sec, what: ops[1].name, s: s[1], baseline: &s[0], note: ops[1].how, err: errs[1]})
}

// catPipeline runs head -c 1GiB /dev/zero | cat > /dev/null as two
// processes and returns cat's peak RSS (VmHWM is a high-water mark, so the
// last sample before exit is the peak). wait4's ru_maxrss would not do:
// it includes the forking parent's RSS at exec time.
func catPipeline() (int64, error) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return 0, err
	}
	defer null.Close()
	head := exec.Command("head", "-c", fmt.Sprint(floodBytes), "/dev/zero")
	cat := exec.Command("cat")
	pr, pw, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	head.Stdout, cat.Stdin, cat.Stdout = pw, pr, null
	if err := cat.Start(); err != nil {
		return 0, err
	}
	if err := head.Start(); err != nil {
		_ = cat.Process.Kill()
		return 0, err
	}
	pw.Close()
	pr.Close()
	done := make(chan error, 1)
	go func() { done <- cat.Wait() }()
	var peak int64
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if kb, err := procStatusKB(cat.Process.Pid, "VmHWM:"); err == nil {
			peak = max(peak, kb)
		}
		select {
		case err := <-done:
			if herr := head.Wait(); err == nil {
				err = herr
			}
			return peak, err
		case <-tick.C:
		}
	}
}
