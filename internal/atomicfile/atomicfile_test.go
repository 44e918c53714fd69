package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestWriteFile(t *testing.T) {
	tests := []struct {
		name     string
		existing []byte // nil: no file yet
		perm     os.FileMode
	}{
		{name: "new file", perm: 0o600},
		{name: "replace", existing: []byte("old content that is longer"), perm: 0o600},
		{name: "replace tightens mode", existing: []byte("old"), perm: 0o640},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "f.json")
			if tt.existing != nil {
				if err := os.WriteFile(p, tt.existing, 0o666); err != nil {
					t.Fatal(err)
				}
			}
			want := []byte("new\n")
			if err := WriteFile(p, want, tt.perm); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("content = %q, want %q", got, want)
			}
			if runtime.GOOS != "windows" {
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm() != tt.perm {
					t.Errorf("mode = %v, want %v", fi.Mode().Perm(), tt.perm)
				}
			}
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) != 1 {
				t.Errorf("directory holds %d entries, want only f.json (temp file left behind?)", len(ents))
			}
		})
	}
}

func TestWriteFileRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symlinks unavailable: %v", err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{link, sub} {
		err := WriteFile(p, []byte("x"), 0o600)
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("WriteFile(%s) = %v, want ErrNotRegular", p, err)
		}
	}
	if got, _ := os.ReadFile(target); string(got) != "keep" {
		t.Errorf("symlink target changed to %q", got)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("symlink was replaced: %v %v", fi, err)
	}
}
