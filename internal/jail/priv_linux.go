package jail

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// dropPrivilege empties the calling thread's capability bounding,
// inheritable and ambient sets and sets no_new_privs. The effective and
// permitted sets stay (the thread still creates each run's pid
// namespace); a run's exec then grants nothing: a user's exec clears
// them, and root's gets only what the (empty) bounding set allows. Per
// thread: the caller forks every run from this locked thread.
func dropPrivilege() error {
	last := unix.CAP_LAST_CAP
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clear inheritable capabilities: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	return nil
}

// refused are the system calls no agent command needs and a jailed one
// could use to leave or weaken its jail, or attack the kernel.
var refused = []string{
	"mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
	"fsopen", "fsconfig", "fsmount", "fspick", "open_tree", "move_mount", "mount_setattr",
	"ptrace", "process_vm_readv", "process_vm_writev",
	"keyctl", "add_key", "request_key",
	"bpf", "perf_event_open", "userfaultfd",
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	"reboot", "swapon", "swapoff", "acct", "quotactl",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"open_by_handle_at", "name_to_handle_at",
}

// ipprotoMPTCP is IPPROTO_MPTCP: Landlock's TCP rules do not see it.
const ipprotoMPTCP = 262

// loadSeccomp installs the jail's filter on the calling thread (and so on
// every run forked from it). Refused calls fail with EPERM; clone3, whose
// flags a filter cannot read, fails with ENOSYS so that libc falls back
// to clone, whose flags it can: a new user namespace (the one namespace
// an unprivileged process can make) is refused there.
func loadSeccomp() error {
	perm := seccomp.ActionErrno | seccomp.Action(unix.EPERM)
	f := seccomp.Filter{
		NoNewPrivs: true,
		Policy: seccomp.Policy{
			DefaultAction: seccomp.ActionAllow,
			Syscalls: []seccomp.SyscallGroup{
				{Names: refused, Action: perm},
				{Names: []string{"clone3"}, Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)},
				{NamesWithCondtions: []seccomp.NameWithConditions{
					{Name: "clone", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: unix.CLONE_NEWUSER}}},
					{Name: "socket", Conditions: seccomp.ArgumentConditions{{Argument: 2, Operation: seccomp.Equal, Value: ipprotoMPTCP}}},
					{Name: "ioctl", Conditions: seccomp.ArgumentConditions{{Argument: 1, Operation: seccomp.Equal, Value: unix.TIOCSTI}}},
					{Name: "ioctl", Conditions: seccomp.ArgumentConditions{{Argument: 1, Operation: seccomp.Equal, Value: unix.TIOCLINUX}}},
				}, Action: perm},
			},
		},
	}
	if err := seccomp.LoadFilter(f); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}

// joinCgroup moves this process into the pids cgroup dir (creating it)
// and bounds it to procs processes.
func joinCgroup(dir string, procs uint64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.FormatUint(procs, 10)), 0); err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	return nil
}

// setLimits sets the confinement's rlimits on this process (inherited by
// every run), and RLIMIT_NPROC to the process bound when no cgroup bounds
// it: the kernel counts that one per user (per user namespace: here, the
// jail's) and does not apply it to root.
func setLimits(o *Options, cgroup bool) error {
	set := func(what int, v uint64) error {
		if v == 0 {
			return nil
		}
		return unix.Setrlimit(what, &unix.Rlimit{Cur: v, Max: v})
	}
	l := o.Confine.Limits
	if err := set(unix.RLIMIT_NOFILE, l.Files); err != nil {
		return fmt.Errorf("limit files: %w", err)
	}
	if err := set(unix.RLIMIT_FSIZE, l.FileSize); err != nil {
		return fmt.Errorf("limit file size: %w", err)
	}
	if !cgroup {
		if err := set(unix.RLIMIT_NPROC, o.procs()); err != nil {
			return fmt.Errorf("limit processes: %w", err)
		}
	}
	return nil
}
