package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/jail"
	"github.com/exechost/exechost/internal/runner"
)

// heavyInits are packages whose initialisation a re-exec entry point
// started per run or per confinement must not pay for (issue 42): the
// Kubernetes driver (whose init registers it), the OpenTelemetry SDK, the
// gateway and the CLI, which imports everything. Each has init work of its own, so
// GODEBUG=inittrace=1 names it when it runs.
var heavyInits = []string{
	"github.com/exechost/exechost/internal/sandbox/kubernetes",
	"go.opentelemetry.io/otel/sdk/resource",
	"github.com/exechost/exechost/internal/gateway",
	"github.com/exechost/exechost/internal/cli",
}

// TestEntryPointsStartBeforeHeavyInits starts each early entry point of
// this binary (which links every package exechost does) with no
// arguments, so it reaches its entry, prints its usage and exits 2, under
// GODEBUG=inittrace=1, and checks that none of heavyInits initialised
// first. `version`, the control, goes through main and so pays for them
// all: it shows that the trace would name them.
func TestEntryPointsStartBeforeHeavyInits(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	inits := func(arg string) []string {
		t.Helper()
		cmd := exec.Command(self, arg)
		cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
		out, _ := cmd.CombinedOutput()
		var pkgs []string
		for _, line := range strings.Split(string(out), "\n") {
			if rest, ok := strings.CutPrefix(line, "init "); ok {
				pkgs = append(pkgs, strings.Fields(rest)[0])
			}
		}
		if len(pkgs) == 0 {
			t.Fatalf("%s printed no init trace:\n%s", arg, out)
		}
		return pkgs
	}
	has := func(pkgs []string, p string) bool {
		for _, q := range pkgs {
			if q == p {
				return true
			}
		}
		return false
	}
	control := inits("-test.run=^$") // the test binary's main path: every init
	for _, p := range heavyInits {
		if !has(control, p) {
			t.Fatalf("control: %s is not initialised on the main path; the check would prove nothing (inits: %d)", p, len(control))
		}
	}
	for _, arg := range []string{"--exechost-jail=v1", "--exechost-confine=v1", "--exechost-interp=v1", "--exechost-reaper=v2"} {
		pkgs := inits(arg)
		for _, p := range heavyInits {
			if has(pkgs, p) {
				t.Errorf("%s initialises %s before its entry point (%d package inits): it must be registered with reexec.RegisterEarly", arg, p, len(pkgs))
			}
		}
	}
}

// TestJailServerIdleMapsLittleOfTheBinary starts a standing jail whose
// server is this test binary and checks that, idle, it maps less than
// three quarters of the binary's read-only pages (text and read-only
// data): the server drops them after setup and maps again only what its
// loop touches (issue 39's idle PSS). The kernel's fault-around maps
// nearly the whole binary into a process that has run its package inits,
// as the control, this test process itself, shows; and it maps whole
// large folios again at each fault, so what the loop touches is several
// MB, not a few pages (static exechost: 5 of 30 MB after 20 runs; this
// test binary: 17 of 31 MB).
func TestJailServerIdleMapsLittleOfTheBinary(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mapped := func(pid int) (size, rss int) {
		t.Helper()
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
		if err != nil {
			t.Fatal(err)
		}
		in := false
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) >= 6 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
				in = f[5] == self && (f[1] == "r-xp" || f[1] == "r--p")
				continue
			}
			if !in || len(f) < 2 {
				continue
			}
			n, _ := strconv.Atoi(f[1])
			switch f[0] {
			case "Size:":
				size += n
			case "Rss:":
				rss += n
			}
		}
		if size == 0 {
			t.Fatalf("no read-only mapping of %s in /proc/%d/smaps", self, pid)
		}
		return size, rss
	}
	if size, rss := mapped(os.Getpid()); rss*4 < size*3 {
		t.Skipf("control: this process maps only %d of %d kB of its binary; the kernel does not fault it in whole here, so the check would prove nothing", rss, size)
	}
	p, err := jail.NewPool(jail.WithExecutable(self))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	j, release, err := p.Get(jail.Options{Confine: confine.Confinement{Writable: []string{t.TempDir()}, Network: confine.NetworkNone}})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	// One run first: the idle server is one that has served.
	if res, err := runner.Run(context.Background(), runner.Spec{Argv: []string{"/bin/true"}, Jail: j, Timeout: time.Minute}); err != nil || !res.Success {
		t.Fatalf("run in the jail: %+v, %v", res, err)
	}
	if size, rss := mapped(j.Pid()); rss*4 > size*3 {
		t.Errorf("the idle jail server maps %d of %d kB of the binary's read-only pages, want at most three quarters", rss, size)
	}
}
