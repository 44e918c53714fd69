package agent

import (
	"debug/elf"
	"fmt"

	"github.com/exechost/exechost/internal/hint"
)

// CheckStatic reports why the binary at path cannot run as the agent in
// an arbitrary container image (which may have no C library or a different
// one), or nil when it is a statically linked Linux executable: no program
// interpreter and no shared-library dependencies.
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("agent binary %s: %w", path, err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("agent binary %s: not an executable (%s)", path, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return hint.Wrap(fmt.Errorf("agent binary %s is dynamically linked", path), "build exechost with CGO_ENABLED=0, as released, or set sandbox.agentBinary to such a build")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		return hint.Wrap(fmt.Errorf("agent binary %s needs shared libraries %v", path, libs), "build with CGO_ENABLED=0")
	}
	return nil
}
