//go:build unix

package approvals

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestPermissionsUnderUmask000 checks that modes do not depend on the
// umask. Umask is process-wide, so this test must not run in parallel.
func TestPermissionsUnderUmask000(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	s := newTestStore(t)
	if _, err := s.Update(func(f *File) error { f.AddPattern("*", "/usr/bin/rg"); return nil }); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{
		s.StateDir:       0o700,
		s.Path:           0o600,
		s.Path + ".lock": 0o600,
	} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}
}

func TestLoosePermissionsTightened(t *testing.T) {
	s := newTestStore(t)
	if _, err := s.Ensure(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(s.Path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(s.StateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ensure(); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{s.StateDir: 0o700, s.Path: 0o600} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want mode %v", p, fi.Mode().Perm(), err, want)
		}
	}
}

// TestUnchangedFileNotRewritten uses the inode to see whether Ensure
// replaced the file: an unchanged file must not be rewritten.
func TestUnchangedFileNotRewritten(t *testing.T) {
	s := newTestStore(t)
	if _, err := s.Ensure(); err != nil {
		t.Fatal(err)
	}
	ino := func() uint64 {
		fi, err := os.Stat(s.Path)
		if err != nil {
			t.Fatal(err)
		}
		return uint64(fi.Sys().(*syscall.Stat_t).Ino)
	}
	before := ino()
	if _, err := s.Ensure(); err != nil {
		t.Fatal(err)
	}
	if ino() != before {
		t.Error("Ensure rewrote an unchanged file")
	}
	if _, err := s.Update(func(f *File) error { f.AddPattern("*", "/a/b"); return nil }); err != nil {
		t.Fatal(err)
	}
	if ino() == before {
		t.Error("Update with a change did not replace the file")
	}
}

func TestForeignOwnerRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("SKIP: changing a file's owner to nobody (65534) needs root; run the tests as root to cover the foreign-owner refusal")
	}
	const content = `{"version": 1, "defaults": {"security": "full"}}`
	s := newTestStore(t)
	writeRaw(t, s, content)
	if err := os.Chown(s.Path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	ops := map[string]func() error{
		"Load":   func() error { _, err := s.Load(); return err },
		"Ensure": func() error { _, err := s.Ensure(); return err },
		"Update": func() error { _, err := s.Update(func(*File) error { return nil }); return err },
	}
	for name, op := range ops {
		if err := op(); !errors.Is(err, ErrForeignOwner) || !strings.Contains(err.Error(), "uid 65534") {
			t.Errorf("%s on a file owned by nobody = %v, want ErrForeignOwner naming uid 65534", name, err)
		}
	}
	if data, _ := os.ReadFile(s.Path); string(data) != content {
		t.Errorf("foreign file changed: %s", data)
	}

	// A directory owned by someone else is refused too.
	s2 := newTestStore(t)
	if err := os.MkdirAll(s2.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(s2.StateDir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Ensure(); !errors.Is(err, ErrForeignOwner) {
		t.Errorf("Ensure in a directory owned by nobody = %v, want ErrForeignOwner", err)
	}
	if _, err := s2.Load(); !errors.Is(err, ErrForeignOwner) {
		t.Errorf("Load from a directory owned by nobody = %v, want ErrForeignOwner", err)
	}
	if _, err := os.Stat(s2.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file created in a foreign directory: %v", err)
	}
}

// TestHandSetPathDirectoryOnlyChecked makes sure a Path outside the state
// directory never gets its directory chmodded.
func TestHandSetPathDirectoryOnlyChecked(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &Store{Path: filepath.Join(dir, "a.json"), StateDir: filepath.Join(dir, "state")}
	if _, err := s.Ensure(); err == nil || !strings.Contains(err.Error(), "chmod 700") {
		t.Errorf("Ensure in a 0755 directory = %v, want a refusal with a chmod hint", err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o755 {
		t.Errorf("directory mode changed to %v", fi.Mode().Perm())
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ensure(); err != nil {
		t.Errorf("Ensure in a 0700 directory: %v", err)
	}

	// Without a StateDir, Path's directory is not taken for the state
	// directory either.
	loose := t.TempDir()
	if err := os.Chmod(loose, 0o755); err != nil {
		t.Fatal(err)
	}
	bare := &Store{Path: filepath.Join(loose, "b.json")}
	if _, err := bare.Ensure(); err == nil {
		t.Error("Ensure with only Path in a 0755 directory succeeded")
	}
	if fi, _ := os.Stat(loose); fi.Mode().Perm() != 0o755 {
		t.Errorf("directory mode changed to %v", fi.Mode().Perm())
	}
}
