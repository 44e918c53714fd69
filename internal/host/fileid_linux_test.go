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
// the analysis (Segment.File), also when the analysis is the memo's or
// read its facts from the fact cache; after
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
				for pass := range 6 { // the first analyses, the next two come from the memo
					req := req
					if pass >= 3 {
						// A text never seen: the memo misses, and the
						// fact cache answers what earlier texts read.
						req.RawCommand = fmt.Sprintf("other x%d-%s; hello", pass, st.name)
					}
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

// TestStaleCacheFailsClosed gives the engine's analysis a watch that sees
// nothing (a Set over "/" alone, standing for a watch that missed a
// change), so that after an executable is replaced the memo and the fact
// cache hand out the old file's analysis: the run must still refuse to
// start the new file (the decision pinned the old one), never run it.
func TestStaleCacheFailsClosed(t *testing.T) {
	if _, ok := fschange.New().Watch([]string{"/"}); !ok {
		t.Skip("cannot watch / here")
	}
	for _, tc := range []struct{ name, warm, text string }{
		{"memo", "other x", "other x"},
		{"memo, interpreted", "other x | hello", "other x | hello"},
		{"fact cache", "other x", "other y"},
		{"fact cache, interpreted", "hello | other x", "hello | other y"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/other", "$BIN/hello")
			w := fschange.New() // the engine's, so its poll answers for the blind Sets
			blind := func([]string) (fschange.Set, bool) { return w.Watch([]string{"/"}) }
			f.engine.Watcher = w
			f.engine.Analyzer = shellcmd.New(shellcmd.Options{Watch: blind, Watcher: w})
			for i := range 3 { // read, watched, then answered from the caches
				warm := tc.warm
				if tc.text != tc.warm {
					warm = fmt.Sprintf("%s%d", warm, i) // each text new: the fact cache's reads
				}
				if _, err := f.engine.Prepare(Request{RawCommand: warm, Cwd: f.dir}); err != nil {
					t.Fatal(err)
				}
			}
			other, marker := filepath.Join(f.bin, "other"), filepath.Join(f.dir, "swapped-ran")
			if err := os.WriteFile(other+".new", []byte("#!/bin/sh\n: > "+marker+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(other+".new", other); err != nil {
				t.Fatal(err)
			}
			req := Request{RawCommand: tc.text, Cwd: f.dir}
			p, err := f.engine.Prepare(req)
			if err != nil {
				t.Fatal(err)
			}
			if cmp.Equal(runner.IDsOf([]string{other}), map[string]runner.FileID{other: p.files[other]}) {
				t.Fatal("the decision names the new file: the caches were not stale, so this test proves nothing")
			}
			res, err := f.engine.Run(context.Background(), req)
			if err == nil && res.ExitCode == 0 {
				t.Errorf("the run of the replaced file succeeded: %+v", res)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the file put in place after the caches read it ran")
			}
		})
	}
}
