package audit

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// writePlain writes n records as a log from before chain keys: plain
// SHA-256 hashes, chained.
func writePlain(t *testing.T, path string, n int, edit func(i int, r *Record)) {
	t.Helper()
	var buf bytes.Buffer
	prev := ""
	for i := range n {
		r := rec("old", i)
		r.Prev = prev
		if edit != nil {
			edit(i, &r)
		}
		line, h, err := encodeLine(r)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(line)
		prev = h
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestChainKeyMigration: a log from before chain keys gets its key on the
// next append, which records the last unkeyed line; those old lines still
// verify, and rewriting one of them (rehashing the rest without the key)
// fails at the first keyed line.
func TestChainKeyMigration(t *testing.T) {
	path := logPath(t)
	writePlain(t, path, 3, nil)
	if _, err := Verify(path); !errors.Is(err, ErrTampered) {
		t.Fatalf("a log without its key: %v, want ErrTampered", err)
	}
	l := openLog(t, path, Options{})
	for i := range 2 {
		if err := l.Append(rec("new", i)); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	if fi, err := os.Stat(KeyPath(path)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	mustVerify(t, path, 5)
	// Rewrite the old lines (deny → allow), rehashed without the key,
	// keeping the new lines as they are.
	data, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(data, []byte("\n"))
	writePlain(t, path, 3, func(i int, r *Record) { r.Decision = DecisionDeny })
	old, _ := os.ReadFile(path)
	if err := os.WriteFile(path, append(old, bytes.Join(lines[3:], nil)...), 0o600); err != nil {
		t.Fatal(err)
	}
	var le *LineError
	if n, err := Verify(path); !errors.As(err, &le) || le.Line != 4 || !errors.Is(err, ErrTampered) {
		t.Fatalf("Verify after rewriting the unkeyed lines = %d, %v; want line 4 tampered", n, err)
	}
}
