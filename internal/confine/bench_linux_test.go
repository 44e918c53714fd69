package confine

import (
	"os"
	"os/exec"
	"testing"
)

// BenchmarkLauncher measures starting /bin/true directly and through the
// launcher with a typical confinement (cwd writable, the state directory
// protected, no network) in the same benchmark: the difference is the
// launcher's cost per run (re-exec of this binary, building the rules
// around the protected set, Landlock, exec). The rules sub-benchmark is the
// part of it that builds the ruleset, measured in-process.
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
	b.Run("rules", func(b *testing.B) {
		abi := KernelABI()
		for b.Loop() {
			fd, _, err := new(Builder).ruleset(c, abi)
			if err != nil {
				b.Fatal(err)
			}
			closeFD(fd)
		}
	})
}
