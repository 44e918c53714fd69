package tui

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/asksock"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/testdep"
)

// tmuxSession drives one tmux session on a private tmux server.
type tmuxSession struct {
	t    *testing.T
	bin  string
	sock string
}

func (s tmuxSession) run(args ...string) string {
	s.t.Helper()
	out, err := exec.Command(s.bin, append([]string{"-S", s.sock}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (s tmuxSession) keys(keys ...string) {
	s.run(append([]string{"send-keys", "-t", "apv"}, keys...)...)
}

func (s tmuxSession) screen() string { return s.run("capture-pane", "-p", "-t", "apv") }

// waitScreen polls the pane until every want appears (the deadline only
// stops a hung test; it asserts nothing about speed).
func (s tmuxSession) waitScreen(want ...string) string {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		scr := s.screen()
		missing := ""
		for _, w := range want {
			if !strings.Contains(scr, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return scr
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("screen never showed %q:\n%s", missing, scr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type promptResult struct {
	a   policy.Approval
	by  string
	err error
}

// TestTUIInTmux runs the real `exechost approver --tui` in tmux, sends
// prompts with the real Client over the socket and answers them with keys.
func TestTUIInTmux(t *testing.T) {
	tmux := testdep.Binary(t, "tmux")
	dir, err := os.MkdirTemp("", "apvtui")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "exechost")
	build := exec.Command("go", "build", "-o", bin, "github.com/exechost/exechost/cmd/exechost")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	stateDir := filepath.Join(dir, "state")
	store := approvals.NewStore(stateDir)
	f, err := store.Ensure()
	if err != nil {
		t.Fatal(err)
	}
	sockPath := store.SocketPath(f)

	s := tmuxSession{t: t, bin: tmux, sock: filepath.Join(dir, "tmux.sock")}
	s.run("new-session", "-d", "-s", "apv", "-x", "160", "-y", "50",
		"env", "-u", "DISPLAY", "-u", "WAYLAND_DISPLAY", "-u", "DBUS_SESSION_BUS_ADDRESS", "TERM=xterm-256color",
		"sh", "-c", `"$0" approver --tui --state-dir "$1"; echo "APPROVER EXITED $?"; sleep 600`, bin, stateDir)
	t.Cleanup(func() { exec.Command(tmux, "-S", s.sock, "kill-server").Run() })
	s.waitScreen("exechost approver", "0 pending")

	client := &asksock.Client{SocketPath: sockPath, Token: []byte(f.Socket.Token), Timeout: 5 * time.Minute}
	ask := func(req prompt.Request) <-chan promptResult {
		ch := make(chan promptResult, 1)
		go func() {
			a, by, err := client.Prompt(context.Background(), req)
			ch <- promptResult{a, by, err}
		}()
		return ch
	}
	expect := func(ch <-chan promptResult, want policy.Approval) {
		t.Helper()
		r := <-ch
		if r.err != nil || r.a != want || r.by != By {
			t.Fatalf("Prompt = %q by %q, %v; want %q by %q", r.a, r.by, r.err, want, By)
		}
	}
	req := func(cmd string, choices ...string) prompt.Request {
		return prompt.Request{
			Command: cmd, Argv: strings.Fields(cmd), Cwd: "/srv/work", Host: "node", NodeID: "build-box",
			AgentID: "main", SessionKey: "sess-42", Security: "allowlist", Ask: "on-miss",
			ResolvedPaths: []string{"/usr/bin/" + strings.Fields(cmd)[0]}, Allowlisted: []bool{false},
			Reason: "allowlist-miss", Choices: choices, Fallback: "deny",
		}
	}

	// One prompt, everything shown, allow once.
	r1 := ask(req("uname -a"))
	scr0 := s.waitScreen("1 pending", "uname -a", "sess-42", "node (node build-box)", "/srv/work",
		"/usr/bin/uname (not allowlisted)", "allowlist-miss", "askFallback=deny", "A allow always", "expires")
	t.Logf("screen:\n%s", scr0)
	s.keys("a")
	expect(r1, policy.AllowOnce)
	s.waitScreen("0 pending", "allow-once by approver tui")

	// Two queued: move down, answer the second, then the first.
	r2 := ask(req("hostname"))
	s.waitScreen("1 pending", "hostname")
	r3 := ask(req("whoami"))
	s.waitScreen("2 pending", "whoami")
	s.keys("Down", "d")
	expect(r3, policy.Reject)
	s.waitScreen("1 pending")
	s.keys("A")
	s.waitScreen("press y to confirm")
	s.keys("y")
	expect(r2, policy.AllowAlways)
	s.waitScreen("0 pending")

	// ask=always: allow always is neither offered nor accepted.
	r4 := ask(req("date", "allow-once", "deny"))
	scr := s.waitScreen("1 pending", "date", "a allow once · d deny")
	if strings.Contains(scr, "A allow always") {
		t.Errorf("allow always offered for a prompt without it:\n%s", scr)
	}
	s.keys("A")
	s.waitScreen("allow-always is not offered")
	s.keys("a")
	expect(r4, policy.AllowOnce)

	// q quits the approver, which removes its socket.
	s.keys("q")
	s.waitScreen("APPROVER EXITED 0")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Lstat(sockPath); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("socket %s still present after quitting the TUI", sockPath)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
