// Package atomicfile replaces files so that a reader, or a crash, sees either
// the old content or the new content in full, never a torn mix. Policy files
// (exec-approvals.json, node.json, gateway.json) go through it: a half-written
// policy file would fail closed at best and be misread at worst.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// ErrNotRegular is returned when the target exists but is not a regular file
// (a symlink, directory, FIFO …). Renaming over a symlink would silently
// replace it, so the caller must decide what to do with it first.
var ErrNotRegular = errors.New("not a regular file")

// WriteFile writes data to a temporary file in filename's directory, sets
// perm explicitly (so the mode does not depend on the umask), fsyncs it,
// renames it over filename and fsyncs the directory so the rename itself is
// durable.
func WriteFile(filename string, data []byte, perm os.FileMode) (err error) {
	if fi, err := os.Lstat(filename); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("atomic write %s: %w (%s)", filename, ErrNotRegular, fi.Mode().Type())
	}
	dir := filepath.Dir(filename)
	f, err := os.CreateTemp(dir, "."+filepath.Base(filename)+".tmp*")
	if err != nil {
		return fmt.Errorf("atomic write %s: %w", filename, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
			err = fmt.Errorf("atomic write %s: %w", filename, err)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filename); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes a rename in dir durable. Windows cannot open a directory
// for syncing and commits renames itself, so it is skipped there.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
