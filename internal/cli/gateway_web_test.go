package cli

import (
	"errors"
	"net"
	"strings"
	"testing"
)

// TestGatewayWebAddress: a --web address that is not loopback host:port is
// a usage error before the gateway starts; a busy one is an operational
// error with a hint, also before the gateway starts.
func TestGatewayWebAddress(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	tests := []struct {
		addr    string
		usage   bool
		wantMsg string
	}{
		{addr: "0.0.0.0:8787", usage: true, wantMsg: "loopback"},
		{addr: "8787", usage: true, wantMsg: "--web"},
		{addr: busy.Addr().String(), wantMsg: "hint: is the port in use?"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			dir := t.TempDir()
			_, _, err := execCLI(t, "--state-dir", dir, "gateway", "--listen", "127.0.0.1:0", "--web", tt.addr)
			var ue usageError
			if err == nil || errors.As(err, &ue) != tt.usage || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("gateway --web %s: %v; want usage error %v containing %q", tt.addr, err, tt.usage, tt.wantMsg)
			}
		})
	}
}
