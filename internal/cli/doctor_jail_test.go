package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/confine"
)

// TestDoctorJail: doctor's jail finding shows the reach of a run of the
// wildcard agent and the layers that hold; on a kernel that cannot build
// the jail it is a problem (such runs are refused), with the fix; and a
// file that asks for unsupported=warn makes it a warning there.
func TestDoctorJail(t *testing.T) {
	dir := t.TempDir()
	f := checkConfinement(dir)
	if !strings.HasPrefix(f.Detail, "agent *: writes: cwd, tmp · network: none · sockets: none · hidden: ") {
		t.Errorf("detail %q", f.Detail)
	}
	abi := confine.KernelABI()
	switch {
	case abi >= 4 && (f.Status != findingOK || !strings.Contains(f.Detail, " · layers: ") || !strings.Contains(f.Detail[strings.LastIndex(f.Detail, " · layers: "):], "landlock")):
		t.Errorf("ABI %d: %+v, want ok with landlock holding", abi, f)
	case abi < 4 && (f.Status != findingProblem || !strings.Contains(f.Fix, "unsupported")):
		t.Errorf("ABI %d: %+v, want a problem naming unsupported=warn", abi, f)
	}
	if err := os.WriteFile(filepath.Join(dir, "exec-approvals.json"), []byte(`{"version":1,"defaults":{"confine":{"unsupported":"warn"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if f := checkConfinement(dir); abi < 4 && f.Status != findingWarn || abi >= 4 && f.Status != findingOK {
		t.Errorf("ABI %d with unsupported=warn: %+v", abi, f)
	}
}
