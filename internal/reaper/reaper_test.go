//go:build unix

package reaper

import (
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
