package audit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/exechost/exechost/internal/state"
	"github.com/exechost/exechost/internal/testdep"
)

// tinyFS mounts a 64 KiB tmpfs for the test, so "disk full" is real.
func tinyFS(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k,mode=0700"); err != nil {
		testdep.Missing(t, "tmpfs mount", "needs root (CAP_SYS_ADMIN) to simulate a full disk: "+err.Error())
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

func TestAppendOnFullDisk(t *testing.T) {
	dir := tinyFS(t)
	path := filepath.Join(dir, state.AuditFile)
	l := openLog(t, path, Options{})
	for i := range 10 {
		if err := l.Append(rec("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Fill the rest of the file system.
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("x"), 1024)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()

	big := rec("a", 10)
	big.Command = strings.Repeat("y", 8<<10) // needs a fresh page
	err = l.Append(big)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Append on a full disk = %v, want ENOSPC", err)
	}
	if !strings.Contains(err.Error(), "hint:") || !strings.Contains(err.Error(), path) {
		t.Errorf("error %q should name the file and carry a hint", err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("a failed append changed the file: %d bytes before, %d after", len(before), len(after))
	}
	mustVerify(t, path, 10)

	// Space comes back: appends resume and the chain is intact.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(big); err != nil {
		t.Fatalf("Append after freeing space: %v", err)
	}
	mustVerify(t, path, 11)
}

// TestAppendWriteFailureLeavesLogIntact makes writes fail without a mount:
// RLIMIT_FSIZE turns a write past the limit into EFBIG (Go ignores
// SIGXFSZ). The same undo path as a full disk runs.
func TestAppendWriteFailureLeavesLogIntact(t *testing.T) {
	path := logPath(t)
	l := openLog(t, path, Options{})
	for i := range 5 {
		if err := l.Append(rec("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := os.ReadFile(path)
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	// A part of the next line fits: the limit is on the write's offset,
	// so it bites inside the preallocated tail too.
	end, err := dataEnd(bytes.NewReader(before), int64(len(before)))
	if err != nil {
		t.Fatal(err)
	}
	lim.Cur = uint64(end) + 100
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	big := rec("a", 5)
	big.Command = strings.Repeat("z", 4096)
	err = l.Append(big)
	if rerr := unix.Setrlimit(unix.RLIMIT_FSIZE, &old); rerr != nil {
		t.Fatal(rerr)
	}
	if !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("Append past RLIMIT_FSIZE = %v, want EFBIG", err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		i := 0
		for i < min(len(before), len(after)) && before[i] == after[i] {
			i++
		}
		t.Errorf("failed append changed the file from byte %d (%d bytes before, %d after): %q", i, len(before), len(after), after[i:min(i+200, len(after))])
	}
	if err := l.Append(big); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, path, 6)
}
