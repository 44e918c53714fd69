package cli

import (
	"bufio"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// gatewayProcess finds the process listening on addr (the gateway's
// loopback address) from this network namespace's socket tables and the
// processes' descriptors this user may read, and returns its pid and the
// path of its executable: /proc/PID/exe itself when the file it ran from
// has been replaced or removed since (an upgrade under a running
// gateway), so what is examined is the binary that runs.
func gatewayProcess(addr netip.AddrPort) (pid int, exe string, err error) {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if err := listeningInodes(table, addr, inodes); err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0, "", err
		}
	}
	if len(inodes) == 0 {
		return 0, "", fmt.Errorf("nothing listens on %s", addr)
	}
	procs, err := filepath.Glob("/proc/[0-9]*/fd/*")
	if err != nil {
		return 0, "", err
	}
	for _, fd := range procs {
		link, err := os.Readlink(fd)
		if err != nil || !strings.HasPrefix(link, "socket:[") {
			continue
		}
		if !inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] {
			continue
		}
		pid, _ = strconv.Atoi(strings.Split(fd, "/")[2])
		self := fmt.Sprintf("/proc/%d/exe", pid)
		path, err := os.Readlink(self)
		if err != nil {
			return pid, "", fmt.Errorf("read the executable of pid %d: %w", pid, err)
		}
		if a, err := os.Stat(self); err == nil {
			if b, err := os.Stat(path); err == nil && os.SameFile(a, b) {
				return pid, path, nil
			}
		}
		return pid, self, nil
	}
	return 0, "", fmt.Errorf("the process listening on %s is not one this user can inspect", addr)
}

// listeningInodes adds to inodes the socket inodes of table (the format
// of /proc/net/tcp) in state LISTEN on addr's port at addr or at the
// wildcard address.
func listeningInodes(table string, addr netip.AddrPort, inodes map[string]bool) error {
	f, err := os.Open(table)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 || fs[3] != "0A" { // 0A: TCP_LISTEN
			continue
		}
		host, port, ok := strings.Cut(fs[1], ":")
		if !ok {
			continue
		}
		if p, err := strconv.ParseUint(port, 16, 16); err != nil || uint16(p) != addr.Port() {
			continue
		}
		ip, ok := procAddr(host)
		if ok && (ip.Unmap() == addr.Addr().Unmap() || ip.IsUnspecified()) {
			inodes[fs[9]] = true
		}
	}
	return sc.Err()
}

// procAddr parses an address of /proc/net/tcp{,6}: hex, each 32-bit word
// in host (little-endian) order.
func procAddr(h string) (netip.Addr, bool) {
	if len(h) != 8 && len(h) != 32 {
		return netip.Addr{}, false
	}
	b := make([]byte, len(h)/2)
	for i := range b {
		v, err := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
		if err != nil {
			return netip.Addr{}, false
		}
		b[i] = byte(v)
	}
	for w := 0; w < len(b); w += 4 {
		b[w], b[w+1], b[w+2], b[w+3] = b[w+3], b[w+2], b[w+1], b[w]
	}
	ip, ok := netip.AddrFromSlice(b)
	return ip, ok
}
