package jail

import (
	"os"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/confine"
	"syscall"
)

// runOut is what one run in j printed, and its exit status.
type runOut struct {
	stdout, stderr string
	status         syscall.WaitStatus
}

func (r runOut) code() int {
	if r.status.Signaled() {
		return 128 + int(r.status.Signal())
	}
	return r.status.ExitStatus()
}

// run runs argv in j with env and dir, and returns its output once it has
// exited (within 30 s).
func run(t *testing.T, j *Jail, dir string, argv ...string) runOut {
	t.Helper()
	or, ow, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	er, ew, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	p, err := j.Start(Request{Argv: argv, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + os.Getenv("HOME")}, Dir: dir,
		Stdin: int(null.Fd()), Stdout: int(ow.Fd()), Stderr: int(ew.Fd()), Exec: -1})
	ow.Close()
	ew.Close()
	if err != nil {
		or.Close()
		er.Close()
		t.Fatalf("start %q: %v", argv, err)
	}
	defer p.Close()
	read := func(f *os.File) chan string {
		c := make(chan string, 1)
		go func() {
			defer f.Close()
			var b []byte
			buf := make([]byte, 4096)
			for {
				n, err := f.Read(buf)
				b = append(b, buf[:n]...)
				if err != nil {
					break
				}
			}
			c <- string(b)
		}()
		return c
	}
	outc, errc := read(or), read(er)
	st, err := p.Wait(30 * time.Second)
	if err != nil {
		p.Kill()
		t.Fatalf("wait %q: %v", argv, err)
	}
	r := runOut{status: st}
	for _, c := range []struct {
		ch  chan string
		dst *string
	}{{outc, &r.stdout}, {errc, &r.stderr}} {
		select {
		case *c.dst = <-c.ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("%q: output not closed after 30s", argv)
		}
	}
	return r
}

// jailFor starts a jail with only layers (nil: all) for c, closed with
// the test, from a pool of the test's own.
func jailFor(t testing.TB, c confine.Confinement, layers []confine.Layer, socketDirs ...string) *Jail {
	t.Helper()
	p, err := NewPool()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if layers == nil {
		layers = AllLayers
	}
	j, release, err := p.Get(Options{Confine: c, Layers: layers, SocketDirs: socketDirs})
	if err != nil {
		t.Fatalf("start jail: %v", err)
	}
	t.Cleanup(release)
	return j
}

func sh(t *testing.T, j *Jail, dir, script string) runOut {
	t.Helper()
	return run(t, j, dir, "/bin/sh", "-c", script)
}
