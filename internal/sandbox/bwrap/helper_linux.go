package bwrap

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/reexec"
	"github.com/exechost/exechost/internal/sandbox"
)

// helperSpec is what the gateway tells the helper, as one JSON argument.
type helperSpec struct {
	// Landlock is auto, require or off.
	Landlock string `json:"landlock"`
	// Pids is the RLIMIT_NPROC to set (0: none).
	Pids int64 `json:"pids,omitempty"`
	// Memory is the RLIMIT_AS to set (0: none).
	Memory int64 `json:"memory,omitempty"`
	// StatusFD receives "ok" (or the Report in probe mode) once every
	// restriction is in place, so the gateway can tell a command's failure
	// from a sandbox that never came up.
	StatusFD int `json:"statusFd"`
	// DropTo, when non-zero, is the host uid and gid to switch to (the
	// gateway runs as root, and bwrap ran without a user namespace).
	DropTo int `json:"dropTo,omitempty"`
	// Nest, when set, makes this helper the first of two stages (root
	// gateway): it drops to DropTo and runs bwrap again, unprivileged,
	// with a fresh user namespace, whose helper then applies Nest.
	Nest *helperSpec `json:"nest,omitempty"`
	// Bwrap is the bwrap binary the first stage runs.
	Bwrap string `json:"bwrap,omitempty"`
	// Probe reports instead of running a command.
	Probe bool `json:"probe,omitempty"`
	// Argv is the command.
	Argv []string `json:"argv,omitempty"`
	// Egress, when set, is the egress socket inside the sandbox (the
	// agent's relay dials it): Landlock lets the sandbox connect to it,
	// and leaves TCP to the network namespace, which holds only the
	// sandbox's loopback (the relay listens there).
	Egress string `json:"egress,omitempty"`
	// egressDir is the host directory mounted at sandbox.EgressMount.
	egressDir string
}

// A binary that imports this package (exechost itself, or a test binary
// whose TestMain calls reexec.Init) becomes the helper when bwrap starts
// it with helperFlag.
func init() {
	reexec.Register(helperFlag, func() { os.Exit(helperMain(reexec.Args(1, -1, "SPEC")[0])) })
}

// helperMain applies the restrictions and execs the command. It returns an
// exit status only on failure: 125 when the sandbox could not be set up
// (the status fd then got nothing, so the gateway reports ErrSetup), 127
// when the command was not found.
func helperMain(specJSON string) int {
	var spec helperSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "exechost sandbox helper: bad spec: %v\n", err)
		return 125
	}
	// Exec must happen on the thread whose attributes were set.
	runtime.LockOSThread()
	if spec.Nest != nil {
		err := nest(spec)
		fmt.Fprintf(os.Stderr, "exechost sandbox helper: %v\n", err)
		return 125
	}
	rep, err := restrict(spec)
	if err != nil {
		fmt.Fprintf(os.Stderr, "exechost sandbox helper: %v\n", err)
		return 125
	}
	status := os.NewFile(uintptr(spec.StatusFD), "status")
	if spec.Probe {
		if err := json.NewEncoder(status).Encode(rep); err != nil {
			return 125
		}
		return 0
	}
	if _, err := status.Write([]byte("ok\n")); err != nil {
		return 125
	}
	status.Close()
	argv := spec.Argv
	path := argv[0]
	if !strings.Contains(path, "/") {
		p, err := exec.LookPath(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: not found\n", path)
			return 127
		}
		path = p
	}
	err = unix.Exec(path, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "%s: %v\n", argv[0], err)
	if os.IsNotExist(err) {
		return 127
	}
	return 126
}

// restrict applies, in order: close-on-exec for every inherited descriptor,
// resource limits, no_new_privs and Landlock. Any failure aborts (fail
// closed), except Landlock being unavailable in auto mode.
func restrict(spec helperSpec) (Report, error) {
	var rep Report
	rep.UID = os.Getuid()
	// Nothing inherited (the workspace and helper descriptors bwrap used,
	// the status pipe) may reach the command.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return rep, fmt.Errorf("close inherited descriptors: %w", err)
	}
	if spec.Pids > 0 {
		lim := &unix.Rlimit{Cur: uint64(spec.Pids), Max: uint64(spec.Pids)}
		if err := unix.Setrlimit(unix.RLIMIT_NPROC, lim); err != nil {
			return rep, fmt.Errorf("set RLIMIT_NPROC: %w", err)
		}
		rep.NProc = uint64(spec.Pids)
	}
	if spec.Memory > 0 {
		lim := &unix.Rlimit{Cur: uint64(spec.Memory), Max: uint64(spec.Memory)}
		if err := unix.Setrlimit(unix.RLIMIT_AS, lim); err != nil {
			return rep, fmt.Errorf("set RLIMIT_AS: %w", err)
		}
		rep.AddressSpace = uint64(spec.Memory)
	}
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		return rep, fmt.Errorf("set RLIMIT_CORE: %w", err)
	}
	if spec.DropTo > 0 {
		if err := dropTo(spec.DropTo); err != nil {
			return rep, err
		}
		rep.UID = os.Getuid()
	}
	// no_new_privs and Landlock apply to this (locked) thread, which is
	// the one that calls execve.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return rep, fmt.Errorf("set no_new_privs: %w", err)
	}
	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil || nnp != 1 {
		return rep, fmt.Errorf("no_new_privs not in effect (%d, %v)", nnp, err)
	}
	rep.NoNewPrivs = true

	abi := confine.KernelABI()
	rep.LandlockABI = abi
	switch {
	case spec.Landlock == LandlockOff:
		rep.Landlock = "off (sandbox.bwrap.landlock=off)"
		return rep, nil
	case abi < 1 && spec.Landlock == LandlockRequire:
		return rep, hint.Wrap(errors.New("landlock required (sandbox.bwrap.landlock=require) but this kernel does not support it"), "Linux 5.13+ with lsm=landlock, or set landlock to auto")
	case abi < 1:
		rep.Landlock = "unavailable on this kernel (mount namespaces still make the host read-only)"
		return rep, nil
	}
	// Everything the kernel's ABI can deny is denied except as granted
	// here: filesystem writes, TCP (ABI 4+), signals and abstract sockets
	// beyond the sandbox (ABI 6+), pathname unix socket connects (ABI 9+).
	box := confine.Confinement{Writable: []string{sandbox.WorkspaceDir, "/tmp", "/dev"}, Network: confine.NetworkNone, Unsupported: confine.UnsupportedWarn}
	tcp := "no TCP"
	if spec.Egress != "" {
		box.Network, box.Sockets = confine.NetworkAll, []string{spec.Egress}
		tcp = "TCP only on the sandbox's loopback (its network namespace), where the egress relay listens"
	}
	if _, err := confine.ApplyThread(&box, abi); err != nil {
		return rep, fmt.Errorf("apply landlock: %w", err)
	}
	rep.Landlock = fmt.Sprintf("enforced (ABI %d): writes only in /workspace, /tmp and /dev; %s", abi, tcp)
	if abi >= 6 {
		rep.Landlock += "; no signals or abstract sockets beyond the sandbox"
	}
	if abi >= 9 {
		rep.Landlock += "; no unix socket connects outside /workspace and /tmp"
	}
	return rep, nil
}

// dropTo switches the calling (locked) thread, which later calls execve, to
// host uid and gid id with no supplementary groups and an empty capability
// bounding set. Raw per-thread system calls are deliberate: the new program
// inherits exactly this thread's credentials, and the Go runtime's
// all-threads variants do not work in cgo binaries.
func dropTo(id int) error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if _, _, errno := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0, 0); errno != 0 && errno != unix.EINVAL {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, errno)
		}
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); errno != 0 {
		return fmt.Errorf("setgroups: %w", errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(id), uintptr(id), uintptr(id)); errno != 0 {
		return fmt.Errorf("setresgid %d: %w", id, errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(id), uintptr(id), uintptr(id)); errno != 0 {
		return fmt.Errorf("setresuid %d: %w", id, errno)
	}
	var hdr = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	if data[0].Effective|data[0].Permitted|data[1].Effective|data[1].Permitted != 0 {
		return fmt.Errorf("capabilities survived the switch to uid %d", id)
	}
	return nil
}

// nest is the first stage of a root gateway's sandbox: it keeps the status
// descriptor open for the second stage, drops to spec.DropTo, sets
// no_new_privs and execs bwrap unprivileged to add a user namespace (which
// bwrap run by root cannot: the sandbox would stay host uid 0, which the
// kernel exempts from RLIMIT_NPROC). The second stage's process limit then
// counts only its own namespace. It returns only on failure.
func nest(spec helperSpec) error {
	if err := unix.CloseRange(uint(spec.StatusFD)+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("close inherited descriptors: %w", err)
	}
	if spec.StatusFD != 3 {
		return fmt.Errorf("status descriptor %d, want 3", spec.StatusFD)
	}
	if err := dropTo(spec.DropTo); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("getwd: %w", err)
	}
	inner := *spec.Nest
	inner.StatusFD = spec.StatusFD
	innerJSON, err := json.Marshal(inner)
	if err != nil {
		return err
	}
	id := strconv.Itoa(spec.DropTo)
	argv := []string{spec.Bwrap,
		"--unshare-user", "--disable-userns", "--uid", id, "--gid", id,
		"--die-with-parent", "--bind", "/", "/",
		// Device nodes do not work through a bind made in the new user
		// namespace; bwrap's --dev provides them the way it does for any
		// unprivileged sandbox.
		"--dev", "/dev", "--chdir", cwd,
		"--", helperPath, helperFlag, string(innerJSON)}
	err = unix.Exec(spec.Bwrap, argv, os.Environ())
	return fmt.Errorf("exec %s: %w", spec.Bwrap, err)
}
