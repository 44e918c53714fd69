package confine

import (
	"golang.org/x/sys/unix"
)

// hostShielded reports whether a command forked from a thread of this
// process (and sharing its Landlock domain) is kept from reaching it by
// the kernel's other checks (see InThread): the process is not dumpable
// and the calling thread holds no CAP_SYS_PTRACE. Both are asked on every
// call (two system calls): either may change while the process runs.
func hostShielded() (bool, string) {
	d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	if err != nil || d != 0 {
		return false, "this process is dumpable: a command sharing a thread's Landlock domain could ptrace it (prctl(PR_SET_DUMPABLE, 0) shields it)"
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false, "cannot read this thread's capabilities: " + err.Error()
	}
	const bit = unix.CAP_SYS_PTRACE
	if (data[bit/32].Permitted|data[bit/32].Effective|data[bit/32].Inheritable)&(1<<(bit%32)) != 0 {
		return false, "this process holds CAP_SYS_PTRACE, which a command it starts keeps and which overrides a process's not being dumpable"
	}
	// A command started by root gets the bounding set's capabilities at
	// its execve, whatever this thread dropped from its own sets.
	if rootExec() {
		inBound, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, bit, 0, 0, 0)
		if err != nil || inBound != 0 {
			return false, "this process runs as root with CAP_SYS_PTRACE in its bounding set, which a command it starts gets back at exec"
		}
	}
	return true, ""
}

// rootExec reports whether an execve by this thread would run as root
// (a real, effective or saved uid of 0), which grants the bounding set.
func rootExec() bool {
	r, e, s := unix.Getresuid()
	return r == 0 || e == 0 || s == 0
}
