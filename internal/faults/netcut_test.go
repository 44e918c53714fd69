//go:build linux

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/testdep"
)

// netns is a network namespace the test created (and deletes).
type netns string

// ip runs iproute2 and fails the test on error.
func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// vethPair creates two namespaces joined by a veth pair, addressed in
// TEST-NET-1 (192.0.2.0/24): traffic between them never leaves the
// namespaces this test created.
func vethPair(t *testing.T) (gw, nd netns, gwIf, ndIf string) {
	t.Helper()
	testdep.Binary(t, "ip")
	if os.Geteuid() != 0 {
		testdep.Missing(t, "root", "network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN")
	}
	tag := fmt.Sprintf("%d", os.Getpid()%100000)
	gw, nd = netns("ehf-gw-"+tag), netns("ehf-nd-"+tag)
	gwIf, ndIf = "ehg"+tag, "ehn"+tag
	for _, ns := range []netns{gw, nd} {
		if out, err := exec.Command("ip", "netns", "add", string(ns)).CombinedOutput(); err != nil {
			testdep.Missing(t, "network namespaces", fmt.Sprintf("ip netns add: %v: %s", err, out))
		}
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", string(ns)).Run() })
	}
	ip(t, "link", "add", gwIf, "netns", string(gw), "type", "veth", "peer", "name", ndIf, "netns", string(nd))
	ip(t, "-n", string(gw), "addr", "add", "192.0.2.1/24", "dev", gwIf)
	ip(t, "-n", string(nd), "addr", "add", "192.0.2.2/24", "dev", ndIf)
	for _, x := range [][2]string{{string(gw), gwIf}, {string(nd), ndIf}, {string(gw), "lo"}, {string(nd), "lo"}} {
		ip(t, "-n", x[0], "link", "set", x[1], "up")
	}
	return gw, nd, gwIf, ndIf
}

func (ns netns) wrap() []string { return []string{"ip", "netns", "exec", string(ns)} }

// cliIn runs an exechost client command inside ns.
func cliIn(t *testing.T, ns netns, dir string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	argv := append(ns.wrap(), append([]string{bin, "--state-dir", dir}, args...)...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "EXECHOST_GATEWAY_TOKEN=", "EXECHOST_INSECURE_PLAINTEXT=1")
	out, err := cmd.Output()
	return string(out), err
}

// TestNetworkCut runs the gateway and a node in separate network
// namespaces, takes the node's link down while a command runs on it, and
// checks that the caller gets an error within a bound (keepalive, not TCP
// timeouts, detects the silent peer), that the node reconnects once the
// link is back, and that the command ran exactly once and is gone after
// its own timeout.
func TestNetworkCut(t *testing.T) {
	gwNS, ndNS, _, ndIf := vethPair(t)
	c := &cluster{t: t, root: t.TempDir(), listen: "192.0.2.1:18789", wrap: gwNS.wrap()}
	c.gwDir = filepath.Join(c.root, "gateway")
	writeFile(t, filepath.Join(c.gwDir, "exechost.json"), gatewayConfig)
	writeFile(t, filepath.Join(c.gwDir, "exec-approvals.json"), policyFull)
	c.startGateway()

	key, err := cliIn(t, gwNS, c.gwDir, "gateway", "join-key", "--gateway", c.url)
	if err != nil {
		t.Fatalf("join-key: %v", err)
	}
	n := &node{name: "far", dir: filepath.Join(c.root, "far"), url: c.url, wrap: ndNS.wrap()}
	writeFile(t, filepath.Join(n.dir, "exec-approvals.json"), policyFull)
	n.start(t, strings.TrimSpace(key))
	waitFor(t, "the node to save its token", func() bool { n.id = readNodeID(n.dir); return n.id != "" })
	connected := func() bool {
		out, err := cliIn(t, gwNS, c.gwDir, "nodes", "list", "--json", "--gateway", c.url)
		if err != nil {
			return false
		}
		var res bridge.NodesResult
		if json.Unmarshal([]byte(out), &res) != nil {
			return false
		}
		for _, v := range res.Nodes {
			if v.NodeID == n.id && v.Connected {
				return true
			}
		}
		return false
	}
	waitFor(t, "the node to connect across the veth pair", connected)

	m := newMarker(t)
	t.Cleanup(m.killLeftovers)
	caller := startCmd(t, append(gwNS.wrap(), bin, "--state-dir", c.gwDir, "exec", "--gateway", c.url,
		"--host", "node", "--node", n.id, "--timeout", "20", m.command())...)
	waitFor(t, "the command to start on the node", func() bool { return m.runs() == 1 && len(m.procs()) > 0 })

	ip(t, "-n", string(ndNS), "link", "set", ndIf, "down")
	select {
	case <-caller.Done():
	case <-time.After(answerBound):
		t.Fatalf("caller got no answer within %s of the network cut; output:\n%s", answerBound, caller.Out)
	}
	if caller.Cmd.ProcessState.Success() {
		t.Fatalf("exec succeeded across a cut link:\n%s", caller.Out)
	}
	t.Logf("caller's answer after the cut: %s", strings.TrimSpace(caller.Out.String()))

	ip(t, "-n", string(ndNS), "link", "set", ndIf, "up")
	waitFor(t, "the node to reconnect after the link came back", connected)
	if left := m.waitGone(answerBound); len(left) > 0 {
		t.Errorf("the command outlived its 20 s timeout on the node: %v", left)
	}
	if got := m.runs(); got != 1 {
		t.Fatalf("the command ran %d times, want exactly 1", got)
	}
}
