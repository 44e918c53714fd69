package reexec_test

import (
	"context"
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/reexec"
)

// The entry points of this test binary: one registered plainly, one early.
const (
	echoName  = "--exechost-reexec-test-echo=v1"
	earlyName = "--exechost-reexec-test-early=v1"
)

// early records that init had run the early entry point before TestMain.
var earlyRan bool

func init() {
	reexec.Register(echoName, func() {
		args := reexec.Args(1, 2, "WORD [WORD]")
		fmt.Println("echo:", strings.Join(args, " "), "early ran:", earlyRan)
		os.Exit(3)
	})
	reexec.RegisterEarly(earlyName, func() {
		fmt.Println("early, before TestMain")
		os.Exit(4)
	})
}

func TestMain(m *testing.M) {
	if reexec.Init() {
		fmt.Println("an entry point returned")
		return
	}
	os.Exit(m.Run())
}

// TestReexec re-executes this test binary as each entry point: Init
// dispatches on the first argument, RegisterEarly's entry runs before
// TestMain, Args refuses a wrong number of arguments, and an unknown
// name is not dispatched (the test binary's flag parsing refuses it).
func TestReexec(t *testing.T) {
	for _, tc := range []struct {
		args []string
		out  string
		code int
	}{
		{[]string{echoName, "hi"}, "echo: hi early ran: false\n", 3},
		{[]string{echoName, "hi", "there"}, "echo: hi there early ran: false\n", 3},
		{[]string{earlyName}, "early, before TestMain\n", 4},
		{[]string{echoName}, "exechost: usage: exechost " + echoName + " WORD [WORD] (an internal entry point: the daemon starts it)\n", 2},
		{[]string{echoName, "a", "b", "c"}, "exechost: usage: exechost " + echoName + " WORD [WORD] (an internal entry point: the daemon starts it)\n", 2},
		{[]string{"--exechost-reexec-test-unknown=v1"}, "flag provided but not defined: -exechost-reexec-test-unknown", 2},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		out, err := exec.CommandContext(ctx, os.Args[0], tc.args...).CombinedOutput()
		cancel()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		got := string(out)
		if strings.HasPrefix(tc.out, "flag provided") {
			got, _, _ = strings.Cut(got, "\n")
		}
		if got != tc.out || code != tc.code {
			t.Errorf("%v: exit %d, output %q; want %d, %q", tc.args, code, got, tc.code, tc.out)
		}
	}
}

// TestRegistry: names are sorted, Dispatch runs the one named and only a
// registered one, and a duplicate or a name outside the namespace panics.
func TestRegistry(t *testing.T) {
	var r reexec.Registry
	var ran []string
	for _, n := range []string{"--exechost-b=v1", "--exechost-a=v1"} {
		r.Register(n, func() { ran = append(ran, n) })
	}
	r.RegisterEarly("--exechost-c=v1", func() { ran = append(ran, "c") })
	if diff := cmp.Diff([]string{"--exechost-a=v1", "--exechost-b=v1", "--exechost-c=v1"}, r.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	for _, argv := range [][]string{{"exe"}, {"exe", "gateway"}, {"exe", "--exechost-a=v2"}, {"exe", "x", "--exechost-a=v1"}} {
		if r.Dispatch(argv) {
			t.Errorf("Dispatch(%q) ran an entry point", argv)
		}
	}
	if !r.Dispatch([]string{"exe", "--exechost-b=v1", "arg"}) || !r.Dispatch([]string{"exe", "--exechost-c=v1"}) {
		t.Error("Dispatch did not run a registered entry point")
	}
	if diff := cmp.Diff([]string{"--exechost-b=v1", "c"}, ran); diff != "" {
		t.Errorf("ran (-want +got):\n%s", diff)
	}
	if !r.Early("--exechost-c=v1") || r.Early("--exechost-a=v1") {
		t.Error("Early does not tell the early entry point from the others")
	}
	for _, tc := range []struct{ name, panic string }{
		{"--exechost-a=v1", "registered twice"},
		{"--exechost-c=v1", "registered twice"},
		{"gateway", "does not start with --exechost-"},
		{"--exechost-", "does not start with --exechost-"},
	} {
		func() {
			defer func() {
				if p := fmt.Sprint(recover()); !strings.Contains(p, tc.panic) {
					t.Errorf("Register(%q) panicked with %q, want %q", tc.name, p, tc.panic)
				}
			}()
			r.Register(tc.name, func() {})
		}()
	}
}

// TestStaysSmall keeps the package's imports to os and slices: the reaper
// imports it and must stay at a Go program's floor of memory.
func TestStaysSmall(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"os", "slices"}, pkg.Imports); diff != "" {
		t.Errorf("package reexec imports (-want +got):\n%s(keep it to os and slices; see the package doc)", diff)
	}
}
