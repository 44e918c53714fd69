//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// startupRows measures `exechost version` start to exit against a static
// hello-world built the same way (interleaved, so both see the same load),
// `exechost node run` from process start to the gateway listing it
// connected (join-key pairing included), and the static binary's size
// against the hello-world's.
func (b *bench) startupRows() error {
	sec := "Startup and size"
	hello, helloErr := buildHello(b.tmp)
	ops := []op{
		{name: "static hello-world start to exit (baseline)", how: "CGO_ENABLED=0 go build -trimpath of fmt.Println, os/exec Run", skip: helloErr, run: func() error {
			return exec.Command(hello).Run()
		}},
		{name: "`exechost version` start to exit", how: "os/exec Run of the same binary's version command: runtime and every linked package's init, then the CLI", run: func() error {
			if err := exec.Command(b.bin, "version").Run(); err != nil {
				return fmt.Errorf("exechost version: %w", err)
			}
			return nil
		}},
	}
	s, errs := interleave(5, b.iters(200, 30), ops)
	b.add(row{section: sec, what: ops[0].name, s: s[0], note: ops[0].how, err: errs[0]})
	b.add(row{section: sec, what: ops[1].name, s: s[1], baseline: &s[0], note: ops[1].how, err: errs[1],
		target: "≤ 3 × hello-world p50", met: metRatio(s[1], s[0], 3, errors.Join(errs[0], errs[1]))})

	c, err := startCluster(b.bin, filepath.Join(b.tmp, "startup"))
	if err != nil {
		return err
	}
	defer c.close()
	cold := sample{name: "cold"}
	var coldErr error
	for i := 0; i < b.iters(10, 3) && coldErr == nil; i++ {
		nd, d, err := c.addNode(fmt.Sprintf("cold%02d", i))
		if err != nil {
			coldErr = err
			continue
		}
		cold.durs = append(cold.durs, d)
		nd.p.stop()
	}
	b.add(row{section: sec, what: "`exechost node run` cold start to registered", s: cold, baseline: &s[1], err: coldErr,
		note: "new state dir + join key: start → identity → dial → connect → paired; polled via nodes.list every 2 ms; ratio over `exechost version`"})

	fi, err := os.Stat(b.bin)
	if err != nil {
		return err
	}
	size := sample{value: 0, unit: "MB"}
	if helloErr == nil {
		hfi, err := os.Stat(hello)
		if err != nil {
			helloErr = err
		} else {
			size.value = float64(hfi.Size()) / 1e6
		}
	}
	b.add(row{section: sec, what: "static hello-world size (baseline)", s: size, err: helloErr, note: "CGO_ENABLED=0 go build -trimpath of fmt.Println"})
	b.add(row{section: sec, what: "exechost binary size", s: sample{value: float64(fi.Size()) / 1e6, unit: "MB"}, baseline: &size,
		note: "CGO_ENABLED=0 go build -trimpath ./cmd/exechost"})
	return nil
}

// buildHello builds a static hello-world the same way as exechost and
// returns its path.
func buildHello(tmp string) (string, error) {
	dir := filepath.Join(tmp, "hello")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.22\n"), 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello\") }\n"), 0o600); err != nil {
		return "", err
	}
	cmd := exec.Command("go", "build", "-trimpath", "-o", "hello", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build hello: %w: %s", err, out)
	}
	return filepath.Join(dir, "hello"), nil
}
