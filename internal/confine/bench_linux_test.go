package confine

import (
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkLauncher measures starting /bin/true directly and through the
// launcher with a typical confinement (cwd writable, the state directory
// protected, no network) in the same benchmark: the difference is the
// launcher's cost per run (re-exec of this binary, building the rules
// around the protected set, Landlock, exec). The rules sub-benchmark is the
// part of it that builds the rulesets, measured in-process: afresh (as the
// launcher does) and with the base layer reused (as the host's in-thread
// start does). The confined-handed sub-benchmark hands the launcher the
// base layer kept by a Builder, as the runner does.
func BenchmarkLauncher(b *testing.B) {
	needLandlock(b, 4)
	l := newLayout(b)
	// The state directory where it normally is, in the home directory:
	// the rules are built around it through / and the home directory.
	home, err := os.UserHomeDir()
	if err != nil {
		b.Fatal(err)
	}
	state, err := os.MkdirTemp(home, ".exechost-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(state) })
	c := &Confinement{Writable: []string{l.work}, Protected: []string{state}, Network: NetworkNone}
	for _, confined := range []bool{false, true} {
		name := "unconfined"
		if confined {
			name = "confined"
		}
		b.Run(name, func(b *testing.B) {
			argv := []string{"/bin/true"}
			if confined {
				var err error
				if argv, err = Wrap(c, argv); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if err := exec.Command(argv[0], argv[1:]...).Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// The launcher handed the base layer as descriptor 4 (as the runner
	// hands the one its Builder keeps): it builds only its own layer.
	b.Run("confined-handed", func(b *testing.B) {
		rb := &Builder{clock: func() unix.Timespec { return unix.NsecToTimespec(1 << 62) }}
		defer rb.Close()
		var argv []string
		for b.Loop() {
			base, err := rb.Base(c, KernelABI())
			if err != nil || base == nil {
				b.Fatal("no base layer", err)
			}
			if argv == nil {
				run, err := base.Hand(c, 4)
				if err != nil {
					b.Fatal(err)
				}
				if argv, err = Wrap(run, []string{"/bin/true"}); err != nil {
					b.Fatal(err)
				}
			}
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.ExtraFiles = []*os.File{nil, base.File()}
			err = cmd.Run()
			base.Close()
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	// The rules: built afresh for every run, and with the base layer
	// around the protected set reused (as the host's engine does).
	for _, afresh := range []bool{true, false} {
		name := "rules"
		if !afresh {
			name = "rules-reused"
		}
		b.Run(name, func(b *testing.B) {
			abi := KernelABI()
			rb := &Builder{Afresh: afresh}
			// The state directory was made a moment ago: with the
			// real clock its parent is too recently changed to keep
			// the layer for 2 s (see base). Nothing changes here.
			rb.clock = func() unix.Timespec { return unix.NsecToTimespec(1 << 62) }
			defer rb.Close()
			for b.Loop() {
				ls, err := rb.layers(c, abi, -1)
				if err != nil {
					b.Fatal(err)
				}
				closeLayers(ls)
			}
		})
	}
}
