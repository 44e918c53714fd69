package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/exechost/exechost/internal/testdep"
)

// pairNode starts a node runner with extra flags and pairs it
// interactively (pending → approve).
func (c *cluster) pairNode(name, displayName, policy string, extra ...string) *node {
	t := c.t
	t.Helper()
	n := c.startNode(name, displayName, policy, extra...)
	waitFor(t, name+" to be pending", func() bool { return c.isPending(n.id) })
	if r := c.cli("nodes", "approve", n.id); r.code != 0 {
		t.Fatalf("approve %s: %s", name, r)
	}
	waitFor(t, name+" to be connected", func() bool { return c.connected(n.id) })
	return n
}

var busRE = regexp.MustCompile(`DBUS_SESSION_BUS_ADDRESS=([^\s)]+)`)

// startSessionApprover runs `exechost approver --exec-host` for dir inside
// a session: under dbus-run-session, with DISPLAY set to a running Xvfb.
// It returns the session's bus address and a function that kills the
// approver (and its session bus).
func startSessionApprover(t *testing.T, dir, display string) (bus string, kill func()) {
	t.Helper()
	dbusRun := testdep.Binary(t, "dbus-run-session")
	errf, err := os.Create(filepath.Join(t.TempDir(), "approver.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(dbusRun, "--", bin, "--state-dir", dir, "approver", "--exec-host", "--auto-decide", "deny")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "DISPLAY=" + display}
	cmd.Stdout, cmd.Stderr = errf, errf // a file: the session's dbus-daemon must not hold a pipe of ours
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	kill = func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // approver, wrapper and bus
		<-done
	}
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			kill()
		}
		if t.Failed() {
			b, _ := os.ReadFile(errf.Name())
			t.Logf("approver output:\n%s", b)
		}
	})
	waitFor(t, "the exec-host approver", func() bool {
		b, _ := os.ReadFile(errf.Name())
		m := busRE.FindSubmatch(b)
		if m != nil {
			bus = string(m[1])
		}
		return m != nil
	})
	return bus, kill
}

// startXvfb starts a virtual display and returns its name (":N").
func startXvfb(t *testing.T) string {
	t.Helper()
	xvfb := testdep.Binary(t, "Xvfb")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(xvfb, "-displayfd", "3", "-nolisten", "tcp", "-screen", "0", "320x240x24")
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	var n int
	_, err = fmt.Fscan(r, &n)
	r.Close()
	if err != nil {
		t.Fatalf("Xvfb did not report its display: %v", err)
	}
	return fmt.Sprintf(":%d", n)
}

// TestApproverExecHost runs the flow with real processes: a node
// runner without a desktop session (--exec-host app) forwards system.run to
// an approver started under a session bus and a virtual display; the
// command sees the approver's session, while the gateway host, without
// forwarding, sees none. With the approver gone, --exec-fallback deny
// refuses with COMPANION_APP_UNAVAILABLE and an Exec denied event, and
// --exec-fallback local runs the command in the node and says so.
func TestApproverExecHost(t *testing.T) {
	testdep.Binary(t, "dbus-run-session")
	display := startXvfb(t)
	for _, name := range []string{"DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR"} {
		if v, ok := os.LookupEnv(name); ok { // the gateway and nodes inherit this environment
			os.Unsetenv(name)
			t.Cleanup(func() { os.Setenv(name, v) })
		}
	}
	c := newCluster(t, gatewayConfig)
	desk := c.pairNode("desk", "Desk", policyFull, "--exec-host", "app", "--exec-fallback", "deny")
	bus, killApprover := startSessionApprover(t, desk.dir, display)
	const echo = `echo "$DBUS_SESSION_BUS_ADDRESS $DISPLAY"`

	res, r := c.execJSON("--host", "node", "--node", desk.id, "--session", "app", echo)
	if r.code != 0 {
		t.Fatalf("forwarded exec: %s", r)
	}
	if want := bus + " " + display + "\n"; res.Stdout != want || res.NodeID != desk.id {
		t.Errorf("forwarded exec stdout %q on node %q, want %q on %q", res.Stdout, res.NodeID, want, desk.id)
	}
	res, r = c.execJSON("--host", "gateway", "--session", "gw", echo)
	if r.code != 0 || res.Stdout != " \n" {
		t.Errorf("gateway exec (no forwarding): stdout %q, want no session variables; %s", res.Stdout, r)
	}

	killApprover()
	_, r = c.execJSON("--host", "node", "--node", desk.id, "--session", "gone", "/usr/bin/true")
	if r.code != 125 || !strings.Contains(r.stderr, "COMPANION_APP_UNAVAILABLE: approver exec host unreachable") {
		t.Fatalf("exec with the approver gone (fallback deny): %s", r)
	}
	// The approver being gone is a failure of the host, not a denial, and
	// the node's own exec.failed is the one event (the gateway adds none).
	want := fmt.Sprintf("Exec failed (node=%s, id=", "Desk") // the node by its name
	evs := c.events("gone")
	if len(evs) != 1 || !hasPrefix(evs, want) || !strings.Contains(evs[0], "COMPANION_APP_UNAVAILABLE") {
		t.Errorf("events %q, want one Exec failed event naming COMPANION_APP_UNAVAILABLE", evs)
	}

	lap := c.pairNode("lap", "Lap", policyFull, "--exec-host", "app", "--exec-fallback", "local")
	res, r = c.execJSON("--host", "node", "--node", lap.id, "echo ran-locally")
	if r.code != 0 || res.Stdout != "ran-locally\n" || !strings.Contains(res.Stderr, "approver exec host unreachable; ran in the node runner instead (execFallback=local)") {
		t.Errorf("exec with no approver (fallback local): stdout %q stderr %q; %s", res.Stdout, res.Stderr, r)
	}
}
