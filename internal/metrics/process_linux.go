package metrics

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// userHZ is the unit of /proc/PID/stat's CPU times: fixed at 100 on Linux
// for user space, whatever the kernel's tick rate.
const userHZ = 100

// processFamilies returns the process_* families from /proc/self; a file
// that cannot be read leaves its families out rather than failing the
// scrape.
func processFamilies() []family {
	var fs []family
	if st, err := readStat(); err == nil {
		fs = append(fs,
			scalar("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", typeCounter, func() float64 { return float64(st.utime+st.stime) / userHZ }),
			scalar("process_virtual_memory_bytes", "Virtual memory size in bytes.", typeGauge, func() float64 { return float64(st.vsize) }),
			scalar("process_resident_memory_bytes", "Resident memory size in bytes.", typeGauge, func() float64 { return float64(st.rss * uint64(os.Getpagesize())) }),
		)
		if boot, err := bootTime(); err == nil {
			fs = append(fs, scalar("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", typeGauge, func() float64 { return float64(boot) + float64(st.starttime)/userHZ }))
		}
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		fs = append(fs, scalar("process_open_fds", "Number of open file descriptors.", typeGauge, func() float64 { return float64(len(fds)) }))
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		fs = append(fs, scalar("process_max_fds", "Maximum number of open file descriptors.", typeGauge, func() float64 { return float64(lim.Cur) }))
	}
	var as syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_AS, &as) == nil {
		fs = append(fs, scalar("process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes.", typeGauge, func() float64 { return float64(as.Cur) }))
	}
	return fs
}

// procStat holds the fields of /proc/self/stat the families use.
type procStat struct {
	utime, stime, starttime, vsize, rss uint64
}

// readStat parses /proc/self/stat. The command name (field 2) may hold
// spaces and parentheses, so fields are counted from its last ')'.
func readStat() (procStat, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return procStat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, strconv.ErrSyntax
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3 (state)
	field := func(n int) uint64 {
		if n-3 >= len(f) {
			err = strconv.ErrSyntax
			return 0
		}
		v, perr := strconv.ParseUint(string(f[n-3]), 10, 64)
		if perr != nil {
			err = perr
		}
		return v
	}
	st := procStat{utime: field(14), stime: field(15), starttime: field(22), vsize: field(23), rss: field(24)}
	return st, err
}

// bootTime reads the boot time (btime) from /proc/stat, in seconds since
// the epoch.
func bootTime() (uint64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			return strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
		}
	}
	return 0, strconv.ErrSyntax
}
