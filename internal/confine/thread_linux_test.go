package confine

import (
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHostShieldedRootBoundingSet: a root host whose thread dropped
// CAP_SYS_PTRACE from its own sets, and which is not dumpable, is still
// not shielded while the bounding set holds the capability: the command
// it starts execs as root and gets it back.
func TestHostShieldedRootBoundingSet(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the case is a root host")
	}
	if in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, unix.CAP_SYS_PTRACE, 0, 0, 0); err != nil || in == 0 {
		t.Skip("CAP_SYS_PTRACE is not in this process's bounding set")
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0) }() // the test process as it was
	type verdict struct {
		ok     bool
		why    string
		broken error
	}
	got := make(chan verdict)
	go func() {
		// Never unlocked: the thread's dropped capabilities end with it.
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			got <- verdict{broken: err}
			return
		}
		const bit = unix.CAP_SYS_PTRACE
		for _, set := range []*uint32{&data[bit/32].Permitted, &data[bit/32].Effective, &data[bit/32].Inheritable} {
			*set &^= 1 << (bit % 32)
		}
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			got <- verdict{broken: err}
			return
		}
		ok, why := hostShielded()
		got <- verdict{ok: ok, why: why}
	}()
	v := <-got
	if v.broken != nil {
		t.Fatalf("drop CAP_SYS_PTRACE from the thread: %v", v.broken)
	}
	if v.ok {
		t.Fatal("a root host with CAP_SYS_PTRACE in its bounding set counts as shielded; the command it starts would get the capability back")
	}
	t.Logf("refused: %s", v.why)
}
