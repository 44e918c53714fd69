// Package egresstest holds what tests of the egress proxy and of the
// places that serve it (the jail, the sandboxes) share.
package egresstest

import (
	"context"
	"net"
	"net/netip"
)

// Resolver resolves names from its table (an egress.Resolver); a name
// not in it fails as a name that does not exist does.
type Resolver map[string][]netip.Addr

// LookupNetIP answers host from the table.
func (m Resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := m[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}
