package agent

import (
	"fmt"
	"io"
	"os"

	"github.com/exechost/exechost/internal/reexec"
)

// InstallFlag makes any binary that links this package (exechost itself,
// built with or without the Kubernetes driver) copy itself to the path that
// follows and exit: a Kubernetes sandbox pod's init container runs it so
// that the agent image needs nothing but the binary.
const InstallFlag = "--exechost-agent-install=v1"

func init() {
	reexec.Register(InstallFlag, func() {
		if err := install(reexec.Args(1, 1, "PATH")[0]); err != nil {
			fmt.Fprintf(os.Stderr, "exechost agent install: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	})
}

// install copies the running executable to dst, readable and executable by
// everyone (the sandbox container may run as another user).
func install(dst string) error {
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		return err
	}
	defer self.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o555)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, self); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}
