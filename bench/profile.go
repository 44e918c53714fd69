//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"
)

// cpuProfile runs fn in a loop for d under the CPU profiler and appends
// the top of `go tool pprof -top` to the report, for a missed target.
func (b *bench) cpuProfile(title string, d time.Duration, fn func() error) {
	path := filepath.Join(b.tmp, strings.NewReplacer(" ", "-", "/", "-").Replace(title)+".pprof")
	f, err := os.Create(path)
	if err != nil {
		b.notes = append(b.notes, "profile "+title+": "+err.Error())
		return
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.notes = append(b.notes, "profile "+title+": "+err.Error())
		return
	}
	n := 0
	for stop := time.Now().Add(d); time.Now().Before(stop); n++ {
		if err := fn(); err != nil {
			break
		}
	}
	pprof.StopCPUProfile()
	f.Close()
	out, err := exec.Command("go", "tool", "pprof", "-top", "-cum", "-nodecount=30", `-hide=^main\.|^runtime\.main$`, path).CombinedOutput()
	if err != nil {
		b.notes = append(b.notes, fmt.Sprintf("profile %s: go tool pprof: %v", title, err))
		return
	}
	b.profile += fmt.Sprintf("# %s: %d iterations in %s; go tool pprof -top -cum -nodecount=30\n%s\n\n", title, n, d, trimPprofHeader(string(out)))
}

// trimPprofHeader drops pprof's lines about the file and build.
func trimPprofHeader(out string) string {
	var keep []string
	for _, line := range strings.Split(string(bytes.TrimSpace([]byte(out))), "\n") {
		if strings.HasPrefix(line, "File:") || strings.HasPrefix(line, "Build ID:") || strings.HasPrefix(line, "Time:") {
			continue
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, "\n")
}
