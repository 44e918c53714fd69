package openclaw

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// SampleHostStats reads what OpenClaw's node host reports: CPUs, the load
// averages, total and available memory (MemAvailable, as Node.js's
// os.freemem), and the disk holding the home directory.
func SampleHostStats() (HostStats, error) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return HostStats{}, err
	}
	unit := uint64(si.Unit)
	if unit == 0 {
		unit = 1
	}
	s := HostStats{CPUCount: runtime.NumCPU(), MemoryTotalBytes: uint64(si.Totalram) * unit, MemoryFreeBytes: uint64(si.Freeram) * unit}
	const loadScale = 1 << unix.SI_LOAD_SHIFT
	s.LoadAverage = &[3]float64{float64(si.Loads[0]) / loadScale, float64(si.Loads[1]) / loadScale, float64(si.Loads[2]) / loadScale}
	if avail, ok := memAvailable(); ok {
		s.MemoryFreeBytes = avail
	}
	if home, err := os.UserHomeDir(); err == nil {
		// The nearest directory that exists, as OpenClaw's tryReadDiskSpace.
		for dir := home; ; dir = filepath.Dir(dir) {
			var fs unix.Statfs_t
			if unix.Statfs(dir, &fs) == nil {
				bs := uint64(fs.Bsize)
				total, avail := fs.Blocks*bs, fs.Bavail*bs
				s.DiskTotalBytes, s.DiskAvailableBytes = &total, &avail
				break
			}
			if dir == filepath.Dir(dir) {
				break
			}
		}
	}
	return s, nil
}

// memAvailable is /proc/meminfo's MemAvailable in bytes.
func memAvailable() (uint64, bool) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == "MemAvailable:" {
			kb, err := strconv.ParseUint(string(f[1]), 10, 64)
			return kb * 1024, err == nil
		}
	}
	return 0, false
}
