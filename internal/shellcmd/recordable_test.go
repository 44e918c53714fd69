package shellcmd

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRecordable(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		cmd       string
		paths     []string
		notesHave []string // substrings, one per expected note, in order
	}{
		{cmd: "ls | grep x | ls", paths: []string{"BIN/ls", "BIN/grep"}},
		{cmd: "env FOO=1 nice timeout 5 ls", paths: []string{"BIN/ls"}},
		{cmd: "sh -c 'ls && rm x'", paths: []string{"BIN/ls", "BIN/rm"}},
		{cmd: "xargs rm", paths: []string{"BIN/rm"}, notesHave: []string{"xargs rm: a wrapper runs whatever command"}},
		{cmd: "ROOT/opt/homebrew/bin/rg x", paths: []string{"ROOT/opt/homebrew/bin/rg"}},
		{cmd: "sudo mytool", paths: []string{"BIN/mytool"}, notesHave: []string{"sudo mytool: a privilege changer is never recorded"}},
		{cmd: "bash x.sh", notesHave: []string{"bash x.sh: the script's contents cannot be allowlisted"}},
		{cmd: "bash", notesHave: []string{"bash: the script's contents cannot be allowlisted"}},
		{cmd: "zsh -c 'python3 x.py'", notesHave: []string{"zsh -c python3 x.py: the script's contents", "python3 x.py: an interpreter runs any code"}},
		{cmd: "ls && awk 1 x", paths: []string{"BIN/ls"}, notesHave: []string{"awk 1 x: an interpreter"}},
		{cmd: "nosuch && ls", paths: []string{"BIN/ls"}, notesHave: []string{`"nosuch" did not resolve`}},
		{cmd: "FOO=1", notesHave: []string{"runs no executable"}},
		{cmd: "ls $(id)", notesHave: []string{"could not be analysed (command substitution"}},
		{cmd: "./bash -c x", notesHave: []string{"a shell is never recorded"}},
	}
	for _, tc := range tests {
		t.Run(tc.cmd, func(t *testing.T) {
			a := Analyze(f.expand(tc.cmd), f.env)
			paths, notes := Recordable(a)
			var want []string
			for _, p := range tc.paths {
				want = append(want, f.expand(p))
			}
			if diff := cmp.Diff(want, paths); diff != "" {
				t.Errorf("Recordable(%q) paths (-want +got):\n%s", tc.cmd, diff)
			}
			if len(notes) != len(tc.notesHave) {
				t.Fatalf("Recordable(%q) notes = %q; want %d notes like %q", tc.cmd, notes, len(tc.notesHave), tc.notesHave)
			}
			for i, n := range tc.notesHave {
				if !strings.Contains(notes[i], n) {
					t.Errorf("Recordable(%q) note %d = %q; want it to contain %q", tc.cmd, i, notes[i], n)
				}
			}
		})
	}
}

// TestRecordableNeverPersistsBroadPrograms checks the invariant directly:
// whatever the command, no recorded path is a shell, interpreter, wrapper
// or privilege changer, and none comes from a failed analysis.
func TestRecordableNeverPersistsBroadPrograms(t *testing.T) {
	f := newFixture(t)
	for _, cmd := range []string{
		"bash -c ls", "env ls", "sudo mytool", "nice python3 x", "sh x.sh", "xargs sh -c 'ls'", "timeout 1 bash",
		"zsh", "fish -c ls", "command env nice ls", "BIN/env BIN/sh -c BIN/node", "HOME/bin/sneaky -c 'ls'",
		"HOME/bin/e ls", "awk 1", "gawk 1", "perl -e 1", "deno run x", "java -jar x", "ls > out",
	} {
		a := Analyze(f.expand(cmd), f.env)
		paths, _ := Recordable(a)
		for _, p := range paths {
			switch classify(filepath.Base(p)) {
			case kindNone:
			default:
				t.Errorf("Recordable(%q) records %s, a shell, interpreter, wrapper or privilege changer", cmd, p)
			}
		}
		if !a.OK && len(paths) > 0 {
			t.Errorf("Recordable(%q) records %q from a failed analysis", cmd, paths)
		}
	}
}
