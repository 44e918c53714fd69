package testdep

import (
	"os"
	"os/exec"
	"testing"
)

// bwrapSystemDirs are the directories a bare `true` needs inside a probe
// sandbox: the binaries and the dynamic loader with its libraries. They are
// bound one by one rather than `--ro-bind / /`, because a recursive bind of
// the whole tree also remounts every submount read-only, and that fails with
// EINVAL on a submount that cannot take the flags — such as the overlay of
// a Docker container that another package's tests started at the same
// moment. The sandbox backend binds a similar list, never `/`.
var bwrapSystemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// Bwrap returns the path of bwrap once a bare sandbox has run `true` with
// it, or reports it missing. userns asks for an unprivileged user namespace
// too (what a non-root gateway uses).
func Bwrap(t testing.TB, userns bool) string {
	t.Helper()
	bw := Binary(t, "bwrap")
	args := []string{"--unshare-all"}
	if userns {
		args = append(args, "--unshare-user")
	}
	for _, d := range bwrapSystemDirs {
		if target, err := os.Readlink(d); err == nil {
			args = append(args, "--symlink", target, d)
		} else if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			args = append(args, "--ro-bind", d, d)
		}
	}
	args = append(args, "true")
	if out, err := exec.Command(bw, args...).CombinedOutput(); err != nil {
		what := "namespaces for bwrap"
		if userns {
			what = "user namespaces for bwrap"
		}
		Missing(t, what, err.Error()+": "+string(out))
	}
	return bw
}
