//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// startupRows measures `exechost node run` from process start to the
// gateway listing it connected (join-key pairing included), against the
// same binary's `exechost version` start-to-exit, and the static binary's
// size against a static hello-world.
func (b *bench) startupRows() error {
	sec := "Startup and size"
	c, err := startCluster(b.bin, filepath.Join(b.tmp, "startup"))
	if err != nil {
		return err
	}
	defer c.close()
	n := b.iters(10, 3)
	base := sample{name: "version"}
	cold := sample{name: "cold"}
	var coldErr error
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := exec.Command(b.bin, "version").Run(); err != nil {
			return fmt.Errorf("exechost version: %w", err)
		}
		base.durs = append(base.durs, time.Since(t0))
		if coldErr != nil {
			continue
		}
		nd, d, err := c.addNode(fmt.Sprintf("cold%02d", i))
		if err != nil {
			coldErr = err
			continue
		}
		cold.durs = append(cold.durs, d)
		nd.p.stop()
	}
	b.add(row{section: sec, what: "`exechost version` start to exit (baseline)", s: base, note: "process start cost of the same binary"})
	b.add(row{section: sec, what: "`exechost node run` cold start to registered", s: cold, baseline: &base, err: coldErr,
		note: "new state dir + join key: start → identity → dial → connect → paired; polled via nodes.list every 2 ms"})

	fi, err := os.Stat(b.bin)
	if err != nil {
		return err
	}
	hello := sample{value: 0, unit: "MB"}
	helloErr := error(nil)
	if sz, err := helloSize(b.tmp); err != nil {
		helloErr = err
	} else {
		hello.value = float64(sz) / 1e6
	}
	b.add(row{section: sec, what: "static hello-world (baseline)", s: hello, err: helloErr, note: "CGO_ENABLED=0 go build -trimpath of fmt.Println"})
	b.add(row{section: sec, what: "exechost binary size", s: sample{value: float64(fi.Size()) / 1e6, unit: "MB"}, baseline: &hello,
		note: "CGO_ENABLED=0 go build -trimpath ./cmd/exechost"})
	return nil
}

// helloSize builds a static hello-world the same way and returns its size.
func helloSize(tmp string) (int64, error) {
	dir := filepath.Join(tmp, "hello")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.22\n"), 0o600); err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello\") }\n"), 0o600); err != nil {
		return 0, err
	}
	cmd := exec.Command("go", "build", "-trimpath", "-o", "hello", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("build hello: %w: %s", err, out)
	}
	fi, err := os.Stat(filepath.Join(dir, "hello"))
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
