package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPinnedExecutable: a run started by the file id decided on starts
// that file, script or binary; a file swapped in at the path afterwards is
// refused and does not run.
func TestPinnedExecutable(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "tool")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho decided \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	id, err := IDOf(script)
	if err != nil {
		t.Fatal(err)
	}
	for _, launch := range launchers(t) {
		res, err := launch(Spec{Argv: []string{script, "a"}, Executable: &id})
		if err != nil || res.Stdout != "decided a\n" {
			t.Fatalf("pinned script: %v %+v", err, res)
		}
	}
	// A binary too (argv[0] as given, not the descriptor's path).
	sh, _ := filepath.EvalSymlinks("/bin/sh")
	shID, err := IDOf(sh)
	if err != nil {
		t.Fatal(err)
	}
	res, err := testRunner.Run(context.Background(), Spec{Argv: []string{sh, "-c", "echo $0"}, Executable: &shID})
	if err != nil || res.Stdout != sh+"\n" {
		t.Fatalf("pinned binary: %v %+v", err, res)
	}
	// Swap the file at the path: the start is refused and nothing runs.
	marker := filepath.Join(dir, "swapped-ran")
	tmp := script + ".new"
	if err := os.WriteFile(tmp, []byte("#!/bin/sh\n: > "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, script); err != nil {
		t.Fatal(err)
	}
	for _, launch := range launchers(t) {
		res, err := launch(Spec{Argv: []string{script}, Executable: &id})
		if !errors.Is(err, ErrExecutableChanged) || res.ExitCode != 126 || !strings.Contains(res.Error, "changed since the decision") {
			t.Fatalf("swapped file: err %v result %+v; want ErrExecutableChanged, exit 126", err, res)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the swapped-in file ran")
	}
}

// launchers runs a spec through the polled launcher and the portable one.
func launchers(t *testing.T) []func(Spec) (Result, error) {
	return []func(Spec) (Result, error){
		func(s Spec) (Result, error) { return New().Run(context.Background(), s) },
		func(s Spec) (Result, error) { return New(Portable()).Run(context.Background(), s) },
	}
}
