package cli

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/gateway"
	"github.com/exechost/exechost/internal/sandbox/docker/dockertest"
	"github.com/exechost/exechost/internal/state"
	"github.com/exechost/exechost/internal/testproc"
)

// closedURL is a loopback gateway URL nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "ws://" + addr
}

// TestHintForSituation: for the common first-week failures, each set up
// for real, the one-line error's hint is the fix for that situation, and
// not the fix for a neighbouring one (what it must not say).
func TestHintForSituation(t *testing.T) {
	for _, c := range []struct {
		name    string
		setup   func(t *testing.T, dir string) []string // the command line after --state-dir
		code    int
		want    []string
		notWant []string
		// out: the hint is in the report on stdout too (doctor's lines).
		out bool
	}{
		{name: "gateway down", code: ExitUnavailable,
			setup: func(t *testing.T, dir string) []string {
				t.Setenv(EnvGatewayToken, "tok")
				return []string{"nodes", "list", "--gateway", closedURL(t)}
			},
			want: []string{"exechost up"}, notWant: []string{"--state-dir", "chmod"}},
		{name: "wrong state dir", code: ExitFailure,
			setup: func(t *testing.T, dir string) []string {
				return []string{"nodes", "list", "--gateway", closedURL(t)}
			},
			want: []string{"gateway.json does not exist", "the gateway's --state-dir", "exechost up"}},
		{name: "token unreadable", code: ExitFailure,
			setup: func(t *testing.T, dir string) []string {
				if err := os.WriteFile(state.TokenPath(dir), []byte(`{"token":"x"}`), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(state.TokenPath(dir), 0o644); err != nil {
					t.Fatal(err)
				}
				return []string{"nodes", "list", "--gateway", closedURL(t)}
			},
			want: []string{"(hint: chmod 600 " + "DIR/gateway.json)"}, notWant: []string{"the gateway's --state-dir"}},
		{name: "approver absent", code: ExitDenied,
			setup: func(t *testing.T, dir string) []string {
				if err := os.WriteFile(filepath.Join(dir, state.ApprovalsFile), []byte(`{"version":1,"defaults":{"security":"allowlist","ask":"on-miss","askFallback":"deny"}}`), 0o600); err != nil {
					t.Fatal(err)
				}
				return []string{"run", "/usr/bin/id"}
			},
			want: []string{"hint: no approver answered", "exechost approver", "fix: exechost approvals allowlist add --agent main /usr/bin/id"}, notWant: []string{"timed out"}},
		{name: "approver busy", code: ExitFailure,
			setup: func(t *testing.T, dir string) []string {
				startApproverIn(t, dir)
				return []string{"approver", "--auto-decide", "deny"}
			},
			want: []string{"an approver is already running", "exechost up --no-approver"}, notWant: []string{"no approver answered"}},
		{name: "name taken", code: ExitFailure,
			setup: func(t *testing.T, dir string) []string {
				url := gatewayWithNode(t, "build-box")
				return []string{"node", "run", "--gateway", url, "--display-name", "Build-Box"}
			},
			want: []string{`display name "Build-Box" is already taken by node `, "--display-name NAME", "exechost nodes remove "}, notWant: []string{"exechost up"}},
		{name: "backend not available", code: ExitFailure, out: true,
			setup: func(t *testing.T, dir string) []string {
				// Docker answers, so a "start dockerd" could only be
				// the wrong fix for bwrap's absence.
				dockertest.Client(t)
				cfg := filepath.Join(dir, "bwrap.json")
				if err := os.WriteFile(cfg, []byte(`{"sandbox": {"backend": "bwrap", "bwrap": {"path": "`+filepath.Join(dir, "no-bwrap")+`"}}}`), 0o600); err != nil {
					t.Fatal(err)
				}
				return []string{"sandbox", "doctor", "--config", cfg}
			},
			want: []string{"bwrap not found", "apt-get install bubblewrap, or set sandbox.bwrap.path", "no sandbox backend works here"}, notWant: []string{"start dockerd"}},
		{name: "image missing", code: ExitFailure, out: true,
			setup: func(t *testing.T, dir string) []string {
				dockertest.Client(t) // a daemon that answers, without the image
				cfg := filepath.Join(dir, "docker.json")
				if err := os.WriteFile(cfg, []byte(`{"sandbox": {"backend": "docker", "docker": {"image": "exechost.test/no-such-image:1"}}}`), 0o600); err != nil {
					t.Fatal(err)
				}
				return []string{"sandbox", "doctor", "--config", cfg}
			},
			want: []string{"exechost.test/no-such-image:1", "`docker pull exechost.test/no-such-image:1`"}, notWant: []string{"start dockerd", "install bubblewrap"}},
		{name: "removed secret flag", code: ExitUsage,
			setup: func(t *testing.T, dir string) []string {
				return []string{"node", "run", "--join-key", "k"}
			},
			want: []string{"--join-key-file FILE", "$EXECHOST_JOIN_KEY"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(EnvGatewayToken, "")
			t.Setenv(state.EnvDir, "")
			dir := t.TempDir()
			args := c.setup(t, dir)
			var out, errb bytes.Buffer
			code := run(append([]string{"--state-dir", dir}, args...), &out, &errb)
			got := errb.String()
			if c.out {
				got = out.String() + got
			}
			got = strings.ReplaceAll(got, dir, "DIR")
			if code != c.code {
				t.Errorf("exit %d, want %d\n%s", code, c.code, got)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("stderr lacks %q:\n%s", w, got)
				}
			}
			for _, w := range c.notWant {
				if strings.Contains(got, w) {
					t.Errorf("stderr says %q, the fix for another situation:\n%s", w, got)
				}
			}
		})
	}
}

// startApproverIn runs `exechost approver --auto-decide deny` on dir until
// the test ends, and returns once it listens.
func startApproverIn(t *testing.T, dir string) {
	t.Helper()
	errb := &lockedBuffer{}
	root := NewRoot(io.Discard, errb)
	root.SetArgs([]string{"approver", "--state-dir", dir, "--auto-decide", "deny"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		testproc.Recv(t, done, "the first approver after cancel")
	})
	waitOut(t, errb, "listening on ")
}

// gatewayWithNode starts a gateway in process and pairs a node named name
// with it through a join key, as `gateway join-key` prints; it returns the
// gateway's URL once the node is connected.
func gatewayWithNode(t *testing.T, name string) string {
	t.Helper()
	gwDir := t.TempDir()
	g, err := gateway.New(gateway.Options{StateDir: gwDir})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "ws://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); _ = g.Serve(ctx, ln) }()
	var key, errb bytes.Buffer
	if code := run([]string{"--state-dir", gwDir, "gateway", "join-key", "--gateway", url}, &key, &errb); code != 0 {
		t.Fatalf("join-key: exit %d\n%s", code, errb.String())
	}
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, key.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	nodeErr := &lockedBuffer{}
	root := NewRoot(io.Discard, nodeErr)
	root.SetArgs([]string{"node", "run", "--state-dir", t.TempDir(), "--gateway", url, "--display-name", name, "--join-key-file", keyFile})
	nctx, ncancel := context.WithCancel(context.Background())
	nodeDone := make(chan error, 1)
	go func() { nodeDone <- root.ExecuteContext(nctx) }()
	t.Cleanup(func() {
		ncancel()
		testproc.Recv(t, nodeDone, "the first node after cancel")
		cancel()
		testproc.Recv(t, served, "the gateway after cancel")
	})
	testproc.Poll(t, 30*time.Second, "the first node to connect", func() bool {
		var out, e bytes.Buffer
		run([]string{"--state-dir", gwDir, "nodes", "list", "--gateway", url, "--json"}, &out, &e)
		return strings.Contains(out.String(), `"displayName": "`+name+`"`) && strings.Contains(out.String(), `"connected": true`)
	})
	return url
}
