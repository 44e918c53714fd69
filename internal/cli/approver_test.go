package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/asksock"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/testproc"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runningApprover is `exechost approver ARGS` running in-process.
type runningApprover struct {
	stdout, stderr *lockedBuffer
	stdin          *io.PipeWriter
	client         *asksock.Client
	done           chan error
}

func startApprover(t *testing.T, args ...string) *runningApprover {
	t.Helper()
	dir, err := os.MkdirTemp("", "apvcli")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	stateDir := filepath.Join(dir, "state")
	ra := &runningApprover{stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan error, 1)}
	pr, pw := io.Pipe()
	ra.stdin = pw
	root := NewRoot(ra.stdout, ra.stderr)
	root.SetIn(pr)
	root.SetArgs(append([]string{"approver", "--state-dir", stateDir}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { ra.done <- root.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		pw.Close()
		testproc.Recv(t, ra.done, "the approver after cancel")
	})
	waitOut(t, ra.stderr, "listening on ")
	store := approvals.NewStore(stateDir)
	f, err := store.Load()
	if err != nil {
		t.Fatal(err)
	}
	ra.client = &asksock.Client{SocketPath: store.SocketPath(f), Token: []byte(f.Socket.Token)}
	return ra
}

// waitOut polls a buffer until re matches (the deadline only stops a hung
// test).
func waitOut(t *testing.T, b *lockedBuffer, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m := rx.FindStringSubmatch(b.String()); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("output never matched %q:\n%s", re, b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var cliRequest = prompt.Request{Command: "uname -a", Argv: []string{"uname", "-a"}, Cwd: "/", Host: "gateway", AgentID: "main"}

func TestApproverAutoDecide(t *testing.T) {
	for _, a := range []policy.Approval{policy.AllowOnce, policy.Reject} {
		t.Run(string(a), func(t *testing.T) {
			ra := startApprover(t, "--auto-decide", string(a))
			// The UI prints the warning as it starts serving, after the
			// socket's "listening on" line startApprover waited for.
			waitOut(t, ra.stderr, regexp.QuoteMeta("WARNING: auto-deciding "+string(a)+" for every prompt"))
			got, by, err := ra.client.Prompt(t.Context(), cliRequest)
			if err != nil || got != a || by != "approver auto-decide" {
				t.Fatalf("Prompt = %q by %q, %v", got, by, err)
			}
		})
	}
}

func TestApproverLineMode(t *testing.T) {
	ra := startApprover(t)
	type res struct {
		a   policy.Approval
		by  string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		a, by, err := ra.client.Prompt(context.Background(), cliRequest)
		ch <- res{a, by, err}
	}()
	id := waitOut(t, ra.stdout, `PENDING (\S+)\n`)[1]
	fmt.Fprintf(ra.stdin, "%s deny\n", id[:8])
	r := testproc.Recv(t, ch, "the prompt's answer")
	if r.err != nil || r.a != policy.Reject || r.by != "approver lines" {
		t.Fatalf("Prompt = %+v", r)
	}
	waitOut(t, ra.stdout, "RESOLVED "+id+" deny by approver lines")
}

func TestApproverNotStolen(t *testing.T) {
	ra := startApprover(t, "--auto-decide", "deny")
	stateDir := strings.TrimSuffix(filepath.Dir(ra.client.SocketPath), "/")
	var stdout, stderr bytes.Buffer
	root := NewRoot(&stdout, &stderr)
	root.SetArgs([]string{"approver", "--auto-decide", "deny", "--state-dir", stateDir})
	err := root.Execute()
	if !errors.Is(err, asksock.ErrAlreadyRunning) || !strings.Contains(err.Error(), fmt.Sprintf("(pid %d)", os.Getpid())) {
		t.Fatalf("second approver: %v, want ErrAlreadyRunning naming pid %d", err, os.Getpid())
	}
	if !strings.Contains(hint.Of(err), "exechost up --no-approver") {
		t.Errorf("second approver's hint %q does not mention up --no-approver", hint.Of(err))
	}
	if a, _, err := ra.client.Prompt(t.Context(), cliRequest); err != nil || a != policy.Reject {
		t.Fatalf("first approver after the attempt: %q, %v", a, err)
	}
}

func TestApproverUsage(t *testing.T) {
	tests := [][]string{
		{"--auto-decide", "allow-always"},
		{"--auto-decide", "yes"},
		{"--tui", "--auto-decide", "deny"},
		{"extra-arg"},
	}
	for _, args := range tests {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			root := NewRoot(&stdout, &stderr)
			root.SetArgs(append([]string{"approver", "--state-dir", t.TempDir()}, args...))
			err := root.Execute()
			var ue usageError
			if !errors.As(err, &ue) && !strings.Contains(fmt.Sprint(err), "unknown command") && !strings.Contains(fmt.Sprint(err), "accepts") {
				t.Fatalf("err = %v, want a usage error", err)
			}
		})
	}
}

func TestApproverWeb(t *testing.T) {
	ra := startApprover(t, "--web", "127.0.0.1:0")
	waitOut(t, ra.stdout, `web UI: http://127\.0\.0\.1:\d+/`)
}

// TestApproverUITable checks the flags → UI choice through approverUIs:
// one UI answers (auto-decide over tui over lines), the web UI serves
// beside any of them.
func TestApproverUITable(t *testing.T) {
	tests := []struct {
		f       approverFlags
		want    string
		wantWeb bool
	}{
		{f: approverFlags{}, want: "approverui.Lines"},
		{f: approverFlags{TUI: true}, want: "tui.UI"},
		{f: approverFlags{Auto: policy.Reject}, want: "approverui.Auto"},
		{f: approverFlags{Auto: policy.AllowOnce, TUI: true}, want: "approverui.Auto"},
		{f: approverFlags{Web: "127.0.0.1:0"}, want: "approverui.Lines", wantWeb: true},
		{f: approverFlags{Web: "127.0.0.1:0", TUI: true}, want: "tui.UI", wantWeb: true},
	}
	for _, tt := range tests {
		opts, err := approverOptions(tt.f, "/state")
		if err != nil {
			t.Fatalf("%+v: %v", tt.f, err)
		}
		if got := fmt.Sprintf("%T", opts.UI); got != tt.want || (opts.Web != nil) != tt.wantWeb {
			t.Errorf("%+v: UI %s, web %v; want %s, web %v", tt.f, got, opts.Web != nil, tt.want, tt.wantWeb)
		}
		if opts.Notify != (tt.f.Auto == "") {
			t.Errorf("%+v: Notify = %v", tt.f, opts.Notify)
		}
	}
}
