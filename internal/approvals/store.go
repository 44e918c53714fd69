package approvals

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/gofrs/flock"

	"github.com/exechost/exechost/internal/atomicfile"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/state"
)

// MaxFileSize bounds how much of an approvals file is read. A larger file is
// refused rather than read into memory on every command.
const MaxFileSize = 16 << 20

// Store reads and writes one approvals file.
type Store struct {
	// Path is the approvals file.
	Path string
	// StateDir is the state directory; the default socket path lives there
	// and, when it is Path's directory, the store creates it 0700.
	StateDir string
	// Home expands "~" in the socket path.
	Home string
}

// NewStore returns the store for stateDir's exec-approvals.json.
func NewStore(stateDir string) *Store {
	return &Store{Path: DefaultPath(stateDir), StateDir: stateDir, Home: state.Home()}
}

func (s *Store) stateDir() string {
	if s.StateDir != "" {
		return s.StateDir
	}
	return filepath.Dir(s.Path)
}

// SocketPath returns f's approval socket path as this store's host sees it.
func (s *Store) SocketPath(f *File) string { return f.SocketPath(s.stateDir(), s.Home) }

// Load reads the file without locking (a rename replaces it atomically, so
// a reader sees a whole file). A missing file yields Default(), unwritten.
// A file that does not parse yields a *ParseError; a file or directory
// owned by another user, ErrForeignOwner. Load follows a symlink: only writing through one
// is refused.
func (s *Store) Load() (*File, error) {
	data, err := s.Read()
	if errors.Is(err, fs.ErrNotExist) {
		return Default(), nil
	}
	if err != nil {
		return nil, err
	}
	return Parse(s.Path, data)
}

// Read returns the bytes Load parses, after the same checks (owner,
// regular file, MaxFileSize). A missing file returns an error matching
// fs.ErrNotExist. A caller that keeps a parsed copy can compare bytes to
// tell whether it still holds, whatever the file's timestamps say.
func (s *Store) Read() ([]byte, error) {
	if fi, err := os.Stat(filepath.Dir(s.Path)); err == nil {
		if err := state.CheckOwner(fi); err != nil {
			return nil, hint.Wrap(fmt.Errorf("load approvals: directory %s: %w: %v", filepath.Dir(s.Path), ErrForeignOwner, err), "use a state directory you own, e.g. --state-dir")
		}
	}
	return s.read(os.Stat, "load")
}

// Ensure creates the file when missing, or fills in what a written file
// always has (a token, a socket path, the defaults), and returns it. It
// writes only when something changed.
func (s *Store) Ensure() (*File, error) { return s.update("", false, nil) }

// Update changes the file under the lock: lock, re-read (or start from
// Default), fn, Normalize, atomic write, unlock. Every mutation goes through
// it, so concurrent writers in several processes never lose each other's
// changes. If fn returns an error nothing is written. The file is not
// rewritten when the change leaves it byte-identical.
func (s *Store) Update(fn func(f *File) error) (*File, error) { return s.update("", false, fn) }

// UpdateIf is Update for editors that showed the user a copy: it fails with
// ErrStale, writing nothing, unless the file's current Hash is baseHash (the
// Hash of what the user edited). A missing file hashes as Default().
func (s *Store) UpdateIf(baseHash string, fn func(f *File) error) (*File, error) {
	return s.update(baseHash, true, fn)
}

func (s *Store) update(baseHash string, check bool, fn func(f *File) error) (*File, error) {
	if err := s.ensureDir(); err != nil {
		return nil, err
	}
	lock := flock.New(s.Path+".lock", flock.SetPermissions(0o600))
	if err := lock.Lock(); err != nil {
		return nil, fmt.Errorf("lock approvals %s: %w", s.Path, err)
	}
	defer lock.Unlock()

	f, old := Default(), []byte(nil)
	data, err := s.read(os.Lstat, "update")
	switch {
	case err == nil:
		if f, err = Parse(s.Path, data); err != nil {
			return nil, err
		}
		old = data
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	if check && f.Hash() != baseHash {
		return nil, hint.Wrap(fmt.Errorf("update approvals %s: %w", s.Path, ErrStale), "reload it and apply your change again")
	}
	if fn != nil {
		if err := fn(f); err != nil {
			return nil, fmt.Errorf("update approvals %s: %w", s.Path, err)
		}
	}
	f.Normalize(s.stateDir())
	out, err := f.Marshal()
	if err != nil {
		return nil, fmt.Errorf("update approvals %s: %w", s.Path, err)
	}
	if old != nil && bytes.Equal(out, old) && s.modeOK() {
		return f, nil
	}
	if err := atomicfile.WriteFile(s.Path, out, 0o600); err != nil {
		return nil, fmt.Errorf("update approvals: %w", err)
	}
	return f, nil
}

func (s *Store) modeOK() bool {
	fi, err := os.Lstat(s.Path)
	return err == nil && fi.Mode().Perm() == 0o600
}

// read returns the file's content after open's checks (stat: os.Stat to
// follow a symlink, os.Lstat to refuse one). A missing file returns an
// error matching fs.ErrNotExist.
func (s *Store) read(stat func(string) (fs.FileInfo, error), op string) ([]byte, error) {
	fh, _, err := s.open(stat, op)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s approvals: %w", op, err)
	}
	if len(data) > MaxFileSize {
		return nil, hint.Wrap(fmt.Errorf("%s approvals %s: larger than %d bytes", op, s.Path, MaxFileSize), "move the file aside; exechost will not overwrite it")
	}
	return data, nil
}

// open opens the file for reading after checking, with stat (os.Stat to
// follow a symlink, os.Lstat to refuse one), that it is a regular file of
// ours; the check is repeated on the open descriptor, whose FileInfo it
// returns. A missing file returns an error matching fs.ErrNotExist.
func (s *Store) open(stat func(string) (fs.FileInfo, error), op string) (*os.File, fs.FileInfo, error) {
	fi, err := stat(s.Path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("%s approvals: %w", op, err)
	}
	if err := s.check(fi, op); err != nil {
		return nil, nil, err
	}
	fh, err := os.Open(s.Path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s approvals: %w", op, err)
	}
	if fi, err = fh.Stat(); err != nil {
		fh.Close()
		return nil, nil, fmt.Errorf("%s approvals: %w", op, err)
	}
	if err := s.check(fi, op); err != nil {
		fh.Close()
		return nil, nil, err
	}
	return fh, fi, nil
}

// Same reports whether Read would return exactly want, without making a
// copy of the file: it runs Read's checks, then compares the file with
// want a piece at a time. Any failure (a missing file, a check that Read
// would fail) reports false; the caller's Read then reports it. A caller
// that keeps a parse of want uses it to tell, exactly and cheaply, that
// the parse still holds.
func (s *Store) Same(want []byte) bool {
	if fi, err := os.Stat(filepath.Dir(s.Path)); err == nil && state.CheckOwner(fi) != nil {
		return false
	}
	fh, fi, err := s.open(os.Stat, "load")
	if err != nil {
		return false
	}
	defer fh.Close()
	if fi.Size() != int64(len(want)) {
		return false
	}
	bp := compareBufs.Get().(*[32 << 10]byte)
	defer compareBufs.Put(bp)
	for {
		n, err := fh.Read(bp[:])
		if n > len(want) || !bytes.Equal(bp[:n], want[:n]) {
			return false
		}
		want = want[n:]
		if err == io.EOF {
			return len(want) == 0
		}
		if err != nil {
			return false
		}
	}
}

// compareBufs are Same's read buffers.
var compareBufs = sync.Pool{New: func() any { return new([32 << 10]byte) }}

func (s *Store) check(fi fs.FileInfo, op string) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return hint.Wrap(fmt.Errorf("%s approvals %s: %w", op, s.Path, ErrSymlink), "replace the link with the file it points to, or point --state-dir at the real directory")
	case !fi.Mode().IsRegular():
		return hint.Wrap(fmt.Errorf("%s approvals %s: not a regular file (%s)", op, s.Path, fi.Mode().Type()), "move it aside")
	}
	if err := state.CheckOwner(fi); err != nil {
		return hint.Wrap(fmt.Errorf("%s approvals %s: %w: %v", op, s.Path, ErrForeignOwner, err), "run exechost as that user, or chown the file")
	}
	return nil
}

// ensureDir makes sure the file's directory exists, is ours and is 0700.
// The state directory (StateDir, when Path is in it) is created and
// tightened if needed; any other directory (a Path set by hand) is only
// checked, never chmodded, so a misconfigured path cannot change /tmp's
// mode.
func (s *Store) ensureDir() error {
	dir := filepath.Dir(s.Path)
	if fi, err := os.Lstat(dir); err == nil {
		if err := state.CheckOwner(fi); err != nil {
			return hint.Wrap(fmt.Errorf("approvals directory %s: %w: %v", dir, ErrForeignOwner, err), "use a state directory you own, e.g. --state-dir")
		}
	}
	if s.StateDir != "" && filepath.Clean(dir) == filepath.Clean(s.StateDir) {
		return state.Ensure(dir)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("approvals directory: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && !isWindows {
		return hint.Wrap(fmt.Errorf("approvals directory %s is mode %#o; the approvals file needs a directory only we can use", dir, perm), fmt.Sprintf("chmod 700 %s", dir))
	}
	return nil
}
