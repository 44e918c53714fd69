package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/fschange"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/runner"
	"github.com/exechost/exechost/internal/shellcmd"
)

// TestFileIDsAreTheFilesNow: the file ids a decision records come from
// the analysis (Segment.File), also when the analysis is the memo's; after
// every kind of change to an executable they must be what a stat of each
// path says now, and the run starts the new file. Both with the memo's
// watch and with a Watch that always refuses (facts read on every reuse).
func TestFileIDsAreTheFilesNow(t *testing.T) {
	for _, watched := range []bool{true, false} {
		t.Run(fmt.Sprintf("watched=%v", watched), func(t *testing.T) {
			f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/other", "$BIN/hello")
			if !watched {
				f.engine.Analyzer = shellcmd.New(shellcmd.Options{Watch: func([]string) (fschange.Set, bool) { return fschange.Set{}, false }})
			}
			other, hello := filepath.Join(f.bin, "other"), filepath.Join(f.bin, "hello")
			n := 0
			replace := func(body string) {
				n++
				tmp := fmt.Sprintf("%s.%d", other, n)
				if err := os.WriteFile(tmp, []byte(body), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tmp, other); err != nil {
					t.Fatal(err)
				}
			}
			steps := []struct {
				name, want string
				change     func()
			}{
				{"as made", "other x\nhello\n", func() {}},
				{"replaced by rename", "new x\nhello\n", func() { replace("#!/bin/sh\necho new \"$@\"\n") }},
				{"chmod-ed in place", "new x\nhello\n", func() {
					if err := os.Chmod(other, 0o700); err != nil {
						t.Fatal(err)
					}
				}},
				{"a symlink to hello", "hello x\nhello\n", func() {
					n++
					tmp := fmt.Sprintf("%s.%d", other, n)
					if err := os.Symlink(hello, tmp); err != nil {
						t.Fatal(err)
					}
					if err := os.Rename(tmp, other); err != nil {
						t.Fatal(err)
					}
				}},
				{"a file again", "again x\nhello\n", func() { replace("#!/bin/sh\necho again \"$@\"\n") }},
			}
			for _, st := range steps {
				st.change()
				req := Request{RawCommand: "other x; hello", Cwd: f.dir}
				for pass := range 3 { // the first analyses, the rest come from the memo
					p, err := f.engine.Prepare(req)
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(runner.IDsOf(p.Analysis.Executables()), p.files); diff != "" {
						t.Fatalf("%s, pass %d: recorded file ids (-stat now +recorded):\n%s", st.name, pass, diff)
					}
				}
				res, err := f.engine.Run(context.Background(), req)
				if err != nil || res.Stdout != st.want {
					t.Fatalf("%s: run %v %+v, want stdout %q", st.name, err, res, st.want)
				}
			}
		})
	}
}
