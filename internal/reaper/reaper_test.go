//go:build unix

package reaper

import (
	"go/build"
	"reflect"
	"testing"
)

// TestGroups checks how the reaper reads its parent's table: only a table
// whose marker it recognises lists groups, in either byte order, and a
// slot outside the range of process group ids is never read as one (it
// would be killed).
func TestGroups(t *testing.T) {
	le := func(vs ...uint32) []byte {
		var b []byte
		for _, v := range vs {
			b = append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
		}
		return b
	}
	be := func(vs ...uint32) []byte {
		var b []byte
		for _, v := range vs {
			b = append(b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
		}
		return b
	}
	for _, tc := range []struct {
		name  string
		table []byte
		want  []int
	}{
		{"little-endian", le(Marker, 12, 0, 99, 1, 0, 1<<30, 1<<31, 77), []int{12, 99, 77}},
		{"big-endian", be(Marker, 12, 0, 99), []int{12, 99}},
		{"no marker", le(0, 12, 99), nil},
		{"garbled marker", le(0x04030201+1, 12), nil},
		{"short", []byte{4, 3}, nil},
		{"torn last slot", append(le(Marker, 12), 9, 9), []int{12}},
	} {
		if got := Groups(tc.table); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Groups = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestStaysALeaf keeps the package's imports to the few low-level ones its
// early initialisation (and so the reaper's small footprint) depends on.
func TestStaysALeaf(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"os": true, "os/signal": true, "syscall": true, "github.com/exechost/exechost/internal/reexec": true}
	for _, imp := range pkg.Imports {
		if !allowed[imp] {
			t.Errorf("package reaper imports %s; keep it to os, os/signal, syscall and reexec (see the package doc)", imp)
		}
	}
}
