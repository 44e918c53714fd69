// Package peeruid tells which local user owns the other end of a
// loopback TCP connection, from the kernel's socket tables
// (/proc/net/tcp and tcp6 of this network namespace): the gateway counts
// handshakes per local user with it, and OpenClaw mode checks that the
// socket it is about to send OpenClaw's token to belongs to this user or
// root. A process cannot choose what those tables say about its sockets.
// Off Linux (no /proc) every lookup fails with ErrNoPeer.
package peeruid

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// ErrNoPeer is Loopback's answer when no local socket matches.
var ErrNoPeer = errors.New("no local socket matches the connection")

// Loopback returns the uid owning the local socket at the other
// end of a loopback TCP connection: the one whose local address is the
// connection's remote address (peer) and whose remote address is ours
// (self). It reads /proc/net/tcp and tcp6 of this network namespace,
// which the kernel fills for every socket: the peer's process cannot
// choose what they say about it.
func Loopback(peer, self netip.AddrPort) (uint32, error) {
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		uid, err := scanTCPTable(name, peer, self)
		if err == nil {
			return uid, nil
		}
		if !errors.Is(err, ErrNoPeer) && !errors.Is(err, os.ErrNotExist) {
			return 0, err
		}
	}
	return 0, ErrNoPeer
}

func scanTCPTable(name string, peer, self netip.AddrPort) (uint32, error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 {
			continue
		}
		local, err1 := parseProcAddr(fields[1])
		remote, err2 := parseProcAddr(fields[2])
		if err1 != nil || err2 != nil || !sameAddrPort(local, peer) || !sameAddrPort(remote, self) {
			continue
		}
		uid, err := strconv.ParseUint(fields[7], 10, 32)
		if err != nil {
			return 0, fmt.Errorf("%s: bad uid %q", name, fields[7])
		}
		return uint32(uid), nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", name, err)
	}
	return 0, ErrNoPeer
}

// sameAddrPort compares two addresses, an IPv4-mapped IPv6 one equal to
// its IPv4 form.
func sameAddrPort(a, b netip.AddrPort) bool {
	return a.Port() == b.Port() && a.Addr().Unmap() == b.Addr().Unmap()
}

// parseProcAddr parses /proc/net/tcp's "0100007F:1F90": the address as
// the kernel's 32-bit words in host (little-endian here) order, the port
// in hex.
func parseProcAddr(s string) (netip.AddrPort, error) {
	host, port, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, errors.New("no port")
	}
	raw, err := hex.DecodeString(host)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, errors.New("bad address")
	}
	p, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return netip.AddrPort{}, err
	}
	b := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.BigEndian.PutUint32(b[i:], binary.LittleEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(addr, uint16(p)), nil
}

// OfConn returns the uid owning the other end of c, a TCP connection on
// loopback: the socket c.RemoteAddr() names, connected to c.LocalAddr().
func OfConn(c net.Conn) (uint32, error) {
	peer, err1 := netip.ParseAddrPort(c.RemoteAddr().String())
	self, err2 := netip.ParseAddrPort(c.LocalAddr().String())
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("not a TCP connection: %w", err)
	}
	return Loopback(peer, self)
}
