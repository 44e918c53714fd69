package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLargeCommandByDigest: a 4 MB command writes a line of a few KiB
// that names the command by its SHA-256 and length and keeps its start.
// Control: the record as given would be the 4 MB line.
func TestLargeCommandByDigest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cmd := "echo " + strings.Repeat("é", 2<<20)
	r := Record{Event: EventDenied, Command: cmd, Reason: "denied: " + cmd, Argv: []string{"sh", "-c", cmd}}
	if pre, err := preEncode(r); err != nil || len(pre) < 3*len(cmd) {
		t.Fatalf("control: the unbounded record encodes to %d bytes (%v)", len(pre), err)
	}
	if err := l.Append(r); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 32<<10 {
		t.Fatalf("the line is %d bytes", fi.Size())
	}
	sum := sha256.Sum256([]byte(cmd))
	var got Record
	if err := Read(path, Filter{}, func(rec Record) error { got = rec; return nil }); err != nil {
		t.Fatal(err)
	}
	if got.CommandSHA256 != hex.EncodeToString(sum[:]) || got.CommandBytes != len(cmd) || !strings.HasPrefix(cmd, got.Command) || len(got.Command) > MaxRecordCommand {
		t.Fatalf("recorded %d bytes of command, sha %s, length %d", len(got.Command), got.CommandSHA256, got.CommandBytes)
	}
	if n, err := Verify(path); err != nil || n != 1 {
		t.Fatalf("verify: %d, %v", n, err)
	}
}
