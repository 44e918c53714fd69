//go:build linux

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/exechost/exechost/internal/runner"
)

// pinRows: starting the decided file by its descriptor (runner.Pin: open,
// fstat, compare, execve of /proc/self/fd/3) beside the same runner start
// by path, interleaved.
func (b *bench) pinRows() {
	sec := "Starting the file decided on (issue 25)"
	exe, err := filepath.EvalSymlinks("/bin/true")
	if err == nil {
		var id runner.FileID
		if id, err = runner.IDOf(exe); err == nil {
			start := func(pin *runner.FileID) func() error {
				return func() error {
					res, err := runner.Run(context.Background(), runner.Spec{Argv: []string{exe}, Executable: pin})
					if err == nil && res.ExitCode != 0 {
						err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Error)
					}
					return err
				}
			}
			ops := []op{
				{name: "runner.Run " + exe + " by path (baseline)", how: "execve of the path", run: start(nil)},
				{name: "runner.Run " + exe + " by descriptor", how: "open O_PATH + fstat + compare the decided dev/inode + execve /proc/self/fd/3", run: start(&id)},
			}
			s, errs := interleave(20, b.iters(1000, 200), ops)
			b.add(row{section: sec, what: ops[0].name, s: s[0], note: ops[0].how, err: errs[0]})
			b.add(row{section: sec, what: ops[1].name, s: s[1], baseline: &s[0], note: ops[1].how, err: errs[1],
				target: "≤ +50 µs p50", met: metDur(s[1].pct(0.5), s[0].pct(0.5)+50*time.Microsecond, errs[1])})
			return
		}
	}
	b.add(row{section: sec, what: "runner.Run by descriptor", err: err})
}
