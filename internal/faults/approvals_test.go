//go:build linux

package faults

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/testdep"
)

// patterns returns the wildcard agent's allowlist patterns.
func patterns(t *testing.T, dir string) map[string]int {
	t.Helper()
	f, err := approvals.NewStore(dir).Load()
	if err != nil {
		t.Fatalf("load approvals: %v", err)
	}
	m := map[string]int{}
	if a := f.Agents["*"]; a != nil {
		for _, e := range a.Allowlist {
			m[e.Pattern]++
		}
	}
	return m
}

// TestConcurrentAllowlistEdits runs 8 editor processes (testdata/editor)
// adding 100 patterns each, one locked Store.Update per pattern, while the
// real CLI adds more, and checks that no entry is lost or duplicated.
// 100 each keeps every editor's updates interleaved with the others' for
// the whole run.
func TestConcurrentAllowlistEdits(t *testing.T) {
	procs, per, cli := 8, 100, 20
	if testing.Short() {
		per, cli = 50, 5
	}
	// The lock is under test, not the disk: on a tmpfs each update's two
	// fsyncs cost nothing, where on a busy disk they made this test the
	// suite's longest (4 minutes). Without the right to mount, the disk.
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=16m,mode=0700"); err != nil {
		t.Logf("state directory on disk (tmpfs mount: %v); fsync makes this slow", err)
	} else {
		t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	}
	if _, err := approvals.NewStore(dir).Ensure(); err != nil {
		t.Fatal(err)
	}
	// A bound against a hang, not a speed claim: on a loaded 2-core
	// machine 4,020 locked rewrites of a growing file took over 3 min.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, procs+cli)
	for p := 0; p < procs; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, editor, dir, fmt.Sprintf("p%d", p), fmt.Sprint(per))
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("editor %d: %v: %s", p, err, out)
			}
		}()
	}
	for i := 0; i < cli; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, bin, "--state-dir", dir, "approvals", "allowlist", "add", fmt.Sprintf("/opt/cli/bin/tool%d", i))
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("cli add %d: %v: %s", i, err, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := patterns(t, dir)
	var missing, dup []string
	check := func(p string) {
		switch got[p] {
		case 0:
			missing = append(missing, p)
		case 1:
		default:
			dup = append(dup, p)
		}
	}
	for p := 0; p < procs; p++ {
		for i := 0; i < per; i++ {
			check(fmt.Sprintf("/opt/p%d/bin/tool%d", p, i))
		}
	}
	for i := 0; i < cli; i++ {
		check(fmt.Sprintf("/opt/cli/bin/tool%d", i))
	}
	if len(missing) > 0 || len(dup) > 0 {
		t.Fatalf("after %d concurrent edits: %d lost (e.g. %v), %d duplicated (e.g. %v)", procs*per+cli, len(missing), head(missing), len(dup), head(dup))
	}
	if want := procs*per + cli; len(got) != want {
		t.Fatalf("allowlist has %d patterns, want %d", len(got), want)
	}
}

func head(s []string) []string {
	if len(s) > 3 {
		return s[:3]
	}
	return s
}

// mountTmpfs mounts a small tmpfs on a fresh directory.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		testdep.Missing(t, "tmpfs mount", "needs root (CAP_SYS_ADMIN) for a read-only or full state directory: "+err.Error())
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// seed writes an approvals file with a few patterns and returns its bytes.
func seed(t *testing.T, dir string) []byte {
	t.Helper()
	s := approvals.NewStore(dir)
	if _, err := s.Update(func(f *approvals.File) error {
		for i := 0; i < 5; i++ {
			f.AddPattern("*", fmt.Sprintf("/usr/local/bin/seed%d", i))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(s.Path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// addMany is an edit large enough not to fit on a nearly full disk.
func addMany(f *approvals.File) error {
	for i := 0; i < 2000; i++ {
		f.AddPattern("*", fmt.Sprintf("/opt/very/long/path/to/some/tool/number/%d/bin/run-the-thing", i))
	}
	return nil
}

// TestApprovalsStoreReadOnlyAndFull edits the store on a read-only and
// on a full file system: the edit fails with an error naming the cause,
// and the file on disk is unchanged and still loads.
func TestApprovalsStoreReadOnlyAndFull(t *testing.T) {
	t.Run("read-only", func(t *testing.T) {
		dir := mountTmpfs(t, "1m")
		before := seed(t, dir)
		if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			t.Fatalf("remount read-only: %v", err)
		}
		_, err := approvals.NewStore(dir).Update(addMany)
		if err == nil {
			t.Fatal("Update on a read-only state dir succeeded")
		}
		if !errors.Is(err, unix.EROFS) {
			t.Errorf("error does not carry EROFS: %v", err)
		}
		t.Logf("read-only error: %v", err)
		assertIntact(t, dir, before)
	})
	t.Run("disk full", func(t *testing.T) {
		dir := mountTmpfs(t, "256k")
		before := seed(t, dir)
		f, err := os.Create(filepath.Join(dir, "filler"))
		if err != nil {
			t.Fatal(err)
		}
		chunk := bytes.Repeat([]byte("x"), 4096)
		for {
			if _, err := f.Write(chunk); err != nil {
				break
			}
		}
		f.Close()
		_, err = approvals.NewStore(dir).Update(addMany)
		if err == nil {
			t.Fatal("Update on a full disk succeeded")
		}
		if !errors.Is(err, unix.ENOSPC) {
			t.Errorf("error does not carry ENOSPC: %v", err)
		}
		t.Logf("disk-full error: %v", err)
		assertIntact(t, dir, before)
	})
}

// assertIntact checks the approvals file still has exactly its old bytes,
// loads, and that no temporary file was left beside it.
func assertIntact(t *testing.T, dir string, before []byte) {
	t.Helper()
	s := approvals.NewStore(dir)
	after, err := os.ReadFile(s.Path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatalf("approvals file changed by a failed edit:\nbefore %q\nafter  %q", before, after)
	}
	if _, err := s.Load(); err != nil {
		t.Fatalf("approvals file no longer loads: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != filepath.Base(s.Path) && e.Name() != "filler" && filepath.Ext(e.Name()) != ".lock" {
			t.Errorf("left behind in the state dir: %s", e.Name())
		}
	}
}
