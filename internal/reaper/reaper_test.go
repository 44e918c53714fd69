//go:build unix

package reaper

import (
	"go/build"
	"reflect"
	"testing"
)

// TestApply checks the request lines the reaper accepts and the ones it
// ignores: a garbled line must never add a group (it would be killed) nor
// remove one (it would survive its daemon).
func TestApply(t *testing.T) {
	groups := map[int]bool{}
	for _, l := range []string{"+12", "+13", "+99", "-13", "+1", "+0", "+-5", "+", "x12", "+1a", "+99999999999999999999", "-", "-77"} {
		apply(groups, []byte(l))
	}
	if want := map[int]bool{12: true, 99: true}; !reflect.DeepEqual(groups, want) {
		t.Fatalf("groups = %v, want %v", groups, want)
	}
}

// TestStaysALeaf keeps the package's imports to the few low-level ones its
// early initialisation (and so the reaper's small footprint) depends on.
func TestStaysALeaf(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"os": true, "os/signal": true, "syscall": true}
	for _, imp := range pkg.Imports {
		if !allowed[imp] {
			t.Errorf("package reaper imports %s; keep it to os, os/signal and syscall (see the package doc)", imp)
		}
	}
}
