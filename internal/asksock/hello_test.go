package asksock

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/prompt"
)

// TestBadHelloSameForBothClients: whatever greets a client on the socket
// instead of a hello of this protocol, the prompt client and the exec
// client classify it the same (parseHello): an error frame is ErrRefused,
// anything else ErrUnreachable, and for exec that means nothing ran.
func TestBadHelloSameForBothClients(t *testing.T) {
	tests := []struct {
		name  string
		hello string
		want  error
	}{
		{"not a hello", `{"type":"decision"}`, prompt.ErrUnreachable},
		{"not json", `hello there`, prompt.ErrUnreachable},
		{"other protocol version", `{"type":"hello","v":99,"challenge":"00112233445566778899aabbccddeeff"}`, prompt.ErrUnreachable},
		{"error frame", `{"type":"error","code":"rate-limited","message":"slow down"}`, prompt.ErrRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.sock")
			ln, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					c.Write([]byte(tt.hello + "\n"))
					c.Close()
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _, perr := (&Client{SocketPath: path, Token: testToken}).Prompt(ctx, prompt.Request{})
			_, xerr := (&ExecClient{SocketPath: path, Token: testToken}).Exec(ctx, bridge.SystemRunParams{Command: []string{"/bin/true"}})
			for who, err := range map[string]error{"prompt": perr, "exec": xerr} {
				if !errors.Is(err, tt.want) {
					t.Errorf("%s client: %v, want %v", who, err, tt.want)
				}
			}
			if !ExecNotRun(xerr) {
				t.Errorf("exec client: %v does not say nothing ran", xerr)
			}
		})
	}
}
