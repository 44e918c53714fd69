package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/gateway"
)

// TestHandshakeSlotsPerLocalUser is issue 40's "any local user locks
// local clients out": another local user (uid 65534, a real process)
// holds MaxHandshakesPerSource idle WebSocket upgrades on loopback; this
// user's client still connects, because loopback handshakes count per
// user. Control: with all of loopback one source, the same upgrades lock
// this user's client out (503).
func TestHandshakeSlotsPerLocalUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("needs bash for /dev/tcp")
	}
	for _, defended := range []bool{true, false} {
		t.Run(map[bool]string{true: "defended", false: "control"}[defended], func(t *testing.T) {
			e := newEnv(t, fullConfig)
			gateway.SetHandshakesPerUser(e.g, defended)
			hostport := strings.TrimPrefix(e.url, "ws://")
			host, port, _ := strings.Cut(hostport, ":")
			script := fmt.Sprintf(`for i in $(seq %d); do exec {fd}<>/dev/tcp/%s/%s; printf 'GET / HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n' >&$fd; done; sleep 30`,
				gateway.MaxHandshakesPerSource, host, port, hostport)
			cmd := exec.Command(bash, "-c", script)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			src := map[bool]string{true: "loopback uid 65534", false: "loopback"}[defended]
			deadline := time.Now().Add(8 * time.Second)
			for gateway.HandshakesFrom(e.g, src) < gateway.MaxHandshakesPerSource {
				if time.Now().After(deadline) {
					t.Fatalf("the other user holds %d handshakes of %q", gateway.HandshakesFrom(e.g, src), src)
				}
				time.Sleep(10 * time.Millisecond)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, _, err := bridge.Dial(ctx, e.url, bridge.ConnectParams{Role: bridge.RoleOperator, Auth: bridge.Auth{Token: e.token}, Client: bridge.ClientInfo{Name: "test"}}, nil, bridge.Options{})
			if defended && err != nil {
				t.Fatalf("this user's client while another holds %d upgrades: %v", gateway.MaxHandshakesPerSource, err)
			}
			if !defended {
				var busy *bridge.Error
				if !errors.As(err, &busy) || busy.Code != bridge.CodeBusy {
					t.Fatalf("control: this user's client connected with loopback shared (%v): the test shows nothing", err)
				}
				return
			}
			c.Close("done")
		})
	}
}
