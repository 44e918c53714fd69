package approverui

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/testproc"
)

// TestNotifyDesktop runs NotifyDesktop against a stand-in notify-send (a
// real process on PATH that records its arguments).
func TestNotifyDesktop(t *testing.T) {
	bin := t.TempDir()
	record := filepath.Join(t.TempDir(), "args")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" >> " + record + "\n"
	if err := os.WriteFile(filepath.Join(bin, "notify-send"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("DISPLAY", ":99")

	b := prompt.NewBroker()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); NotifyDesktop(ctx, b) }()
	// Submit until the notifier (subscribing concurrently) has seen one.
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		sctx, scancel := context.WithTimeout(ctx, 100*time.Millisecond)
		b.Submit(sctx, prompt.Pending{ID: fmt.Sprint("n", i), Request: prompt.Request{Command: "rm -rf /tmp/x\x1b[2J", AgentID: "main"}})
		scancel()
		got, _ := os.ReadFile(record)
		if strings.Contains(string(got), "exechost: approval needed") {
			if !strings.Contains(string(got), `rm -rf /tmp/x\x1b[2J`) || strings.Contains(string(got), "\x1b") {
				t.Errorf("notification body not escaped: %q", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no notification recorded: %q", got)
		}
	}
	cancel()
	testproc.Recv(t, done, "NotifyDesktop after cancel")
}

func TestNotifyDesktopNeedsASession(t *testing.T) {
	for _, v := range []string{"DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS"} {
		t.Setenv(v, "")
	}
	done := make(chan struct{})
	go func() { defer close(done); NotifyDesktop(t.Context(), prompt.NewBroker()) }()
	testproc.Recv(t, done, "NotifyDesktop without a session") // returns at once
}
