package service

import (
	"fmt"

	"github.com/coreos/go-systemd/v22/daemon"
)

// NotifyReady tells systemd (Type=notify) that the daemon is serving. It is
// a no-op outside systemd (no $NOTIFY_SOCKET), so daemons call it
// unconditionally once they listen / are connected.
func NotifyReady() error { return notify(daemon.SdNotifyReady) }

// NotifyStopping tells systemd that a graceful shutdown began, so the
// drain shows as "deactivating" rather than as a hang.
func NotifyStopping() error { return notify(daemon.SdNotifyStopping) }

// NotifyStatus sets the one-line status `systemctl status` shows.
func NotifyStatus(status string) error { return notify("STATUS=" + status) }

func notify(state string) error {
	if _, err := daemon.SdNotify(false, state); err != nil {
		return fmt.Errorf("sd_notify %s: %w", state, err)
	}
	return nil
}
