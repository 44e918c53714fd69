//go:build !linux

package confine

import (
	"errors"
	"testing"
)

// TestApplyProcessWithoutLandlock checks the fallback where there is no
// Landlock: a confinement that says deny is refused, one that says warn
// runs with a warning, and nothing to confine is no error.
func TestApplyProcessWithoutLandlock(t *testing.T) {
	if Supported || KernelABI() != 0 {
		t.Fatal("Landlock reported outside Linux")
	}
	if _, err := ApplyProcess(&Confinement{Protected: []string{"/s"}}, 0); !errors.Is(err, ErrUnsupported) {
		t.Errorf("deny: %v, want ErrUnsupported", err)
	}
	if w, err := ApplyProcess(&Confinement{Protected: []string{"/s"}, Unsupported: UnsupportedWarn}, 0); err != nil || w == "" {
		t.Errorf("warn: %q %v, want a warning", w, err)
	}
	if w, err := ApplyProcess(&Confinement{Writable: []string{"/"}}, 0); err != nil || w != "" {
		t.Errorf("inactive: %q %v", w, err)
	}
}
