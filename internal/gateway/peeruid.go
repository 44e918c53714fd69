package gateway

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// errNoPeer is loopbackPeerUID's answer when no socket matches.
var errNoPeer = errors.New("no local socket matches the connection")

// loopbackPeerUID returns the uid owning the local socket at the other
// end of a loopback TCP connection: the one whose local address is the
// connection's remote address (peer) and whose remote address is ours
// (self). It reads /proc/net/tcp and tcp6 of this network namespace,
// which the kernel fills for every socket: the peer's process cannot
// choose what they say about it.
func loopbackPeerUID(peer, self netip.AddrPort) (uint32, error) {
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		uid, err := scanTCPTable(name, peer, self)
		if err == nil {
			return uid, nil
		}
		if !errors.Is(err, errNoPeer) && !errors.Is(err, os.ErrNotExist) {
			return 0, err
		}
	}
	return 0, errNoPeer
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
	return 0, errNoPeer
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
