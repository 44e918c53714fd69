package cli

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// checkLandlock probes the kernel for Landlock (the bwrap sandbox's file
// system confinement) by asking for its ABI version, which creates
// nothing.
func checkLandlock() finding {
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return finding{Check: "landlock", Status: findingWarn,
			Detail: fmt.Sprintf("not available (%v): the daemonless sandbox runs without its file system confinement", errno),
			Fix:    "use a kernel ≥ 5.13 with Landlock enabled (lsm=…,landlock on the kernel command line)"}
	}
	return finding{Check: "landlock", Status: findingOK, Detail: fmt.Sprintf("available, ABI version %d", abi)}
}
