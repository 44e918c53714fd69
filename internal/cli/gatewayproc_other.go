//go:build !linux

package cli

import (
	"errors"
	"net/netip"
)

// gatewayProcess needs Linux's /proc: elsewhere sandbox doctor describes
// the binary it runs in.
func gatewayProcess(netip.AddrPort) (int, string, error) {
	return 0, "", errors.New("finding the gateway's process needs Linux's /proc")
}
