package approverui

import (
	"context"
	"os"
	"os/exec"
	"time"

	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/textsafe"
)

// NotifyDesktop shows a desktop notification (notify-send) for every new
// prompt in b until ctx is done, when a desktop session seems to exist
// (DISPLAY, WAYLAND_DISPLAY or DBUS_SESSION_BUS_ADDRESS is set) and
// notify-send is installed. It is a courtesy: it is never required and its
// failures are ignored.
func NotifyDesktop(ctx context.Context, b *prompt.Broker) {
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" && os.Getenv("DBUS_SESSION_BUS_ADDRESS") == "" {
		return
	}
	bin, err := exec.LookPath("notify-send")
	if err != nil {
		return
	}
	ch, stop := b.Subscribe()
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case c, ok := <-ch:
			if !ok {
				return
			}
			if c.Kind != prompt.ChangeAdded {
				continue
			}
			r := c.Pending.Request
			body := textsafe.Bounded(r.Command, 200) + "\nagent " + textsafe.Line(r.AgentID) + " · id " + shortID(c.Pending.ID)
			nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			exec.CommandContext(nctx, bin, "--app-name=exechost", "--urgency=critical", "exechost: approval needed", body).Run()
			cancel()
		}
	}
}

// shortID is the first 8 characters of an id, enough to answer by prefix.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
