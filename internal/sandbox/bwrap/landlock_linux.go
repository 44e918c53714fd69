package bwrap

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock is applied with raw system calls rather than go-landlock: its
// package imports libcap/psx to restrict every thread of a Go process, which
// the helper does not need (it restricts the one locked thread that then
// calls execve, and the new program inherits that thread's domain), and
// which is not in this module's dependency set.

// landlockABI returns the kernel's Landlock ABI version, 0 when it has none.
func landlockABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// Access rights this helper handles, by the ABI that introduced them.
const (
	fsV1 = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG | unix.LANDLOCK_ACCESS_FS_MAKE_SOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	fsRead = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
)

// landlockMasks returns the filesystem, network and scope rights a ruleset
// handles (denies unless granted) on ABI abi.
func landlockMasks(abi int) (fs, net, scoped uint64) {
	fs = fsV1
	if abi >= 2 {
		fs |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		fs |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 4 {
		net = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	}
	if abi >= 5 {
		fs |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	if abi >= 6 {
		scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
	}
	if abi >= 9 {
		fs |= unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX
	}
	if abi >= 10 {
		net |= unix.LANDLOCK_ACCESS_NET_BIND_UDP | unix.LANDLOCK_ACCESS_NET_CONNECT_SEND_UDP
	}
	return fs, net, scoped
}

// landlockRestrict restricts the calling thread (which must be locked, with
// no_new_privs set) to reading and executing everything, and writing only
// beneath rwDirs; network and scope rights the ABI knows are all denied.
func landlockRestrict(abi int, rwDirs []string) error {
	fs, net, scoped := landlockMasks(abi)
	attr := unix.LandlockRulesetAttr{Handled_access_fs: fs, Handled_access_net: net, Scoped: scoped}
	// Pass only the prefix of the struct this ABI understands.
	size := unsafe.Sizeof(attr.Handled_access_fs)
	if abi >= 4 {
		size += unsafe.Sizeof(attr.Handled_access_net)
	}
	if abi >= 6 {
		size += unsafe.Sizeof(attr.Scoped)
	}
	rfd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	defer unix.Close(int(rfd))
	add := func(path string, access uint64) error {
		fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("landlock rule for %s: %w", path, err)
		}
		defer unix.Close(fd)
		pb := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
		if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, rfd, unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&pb)), 0, 0, 0); errno != 0 {
			return fmt.Errorf("landlock rule for %s: %w", path, errno)
		}
		return nil
	}
	if err := add("/", fsRead); err != nil {
		return err
	}
	for _, d := range rwDirs {
		if err := add(d, fs); err != nil {
			return err
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, rfd, 0, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}
