package nodekey

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/exechost/exechost/internal/testproc"
)

func TestLoadOrCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	k, created, err := LoadOrCreate(dir)
	if err != nil || !created {
		t.Fatalf("first LoadOrCreate: created=%v err=%v", created, err)
	}
	fi, err := os.Stat(Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %o, want 600", fi.Mode().Perm())
	}
	again, created, err := LoadOrCreate(dir)
	if err != nil || created {
		t.Fatalf("second LoadOrCreate: created=%v err=%v", created, err)
	}
	if again.DeviceID() != k.DeviceID() {
		t.Fatal("reloading the key changed the identity")
	}
	sum := sha256.Sum256(k.PublicKey())
	if k.DeviceID() != hex.EncodeToString(sum[:]) || len(k.PublicKey()) != 32 {
		t.Errorf("device id %s is not the hex sha256 of the 32-byte public key", k.DeviceID())
	}
	if !regexp.MustCompile(`^[0-9a-f]{4}(:[0-9a-f]{4}){3}$`).MatchString(k.Fingerprint()) || !strings.HasPrefix(k.DeviceID(), strings.ReplaceAll(k.Fingerprint(), ":", "")) {
		t.Errorf("fingerprint %q does not abbreviate device id %s", k.Fingerprint(), k.DeviceID())
	}
	pub, err := ParsePublicKey(k.PublicKeyString())
	if err != nil || DeviceID(pub) != k.DeviceID() {
		t.Fatalf("public key round trip: %v", err)
	}
}

func TestSignVerify(t *testing.T) {
	k, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	other, _ := Generate()
	msg := []byte("v1|challenge")
	sig := k.Sign(msg)
	if !Verify(k.PublicKey(), msg, sig) {
		t.Fatal("a valid signature did not verify")
	}
	bad := []struct {
		name string
		pub  []byte
		msg  []byte
		sig  string
	}{
		{"other message", k.PublicKey(), []byte("v1|challengf"), sig},
		{"other key", other.PublicKey(), msg, sig},
		{"other key's signature", k.PublicKey(), msg, other.Sign(msg)},
		{"truncated signature", k.PublicKey(), msg, sig[:len(sig)-2]},
		{"not base64", k.PublicKey(), msg, "!!!"},
		{"empty signature", k.PublicKey(), msg, ""},
		{"short public key", k.PublicKey()[:31], msg, sig},
		{"no public key", nil, msg, sig},
	}
	for _, tt := range bad {
		if Verify(tt.pub, tt.msg, tt.sig) {
			t.Errorf("%s: verified", tt.name)
		}
	}
	for _, s := range []string{"", "AAAA", k.PublicKeyString() + "AA", "not base64!"} {
		if _, err := ParsePublicKey(s); err == nil {
			t.Errorf("ParsePublicKey(%q) accepted", s)
		}
	}
}

func TestBadKeyFileIsNeverReplaced(t *testing.T) {
	cases := []struct {
		name, data string
		mode       os.FileMode
		want       string
	}{
		{"garbage", "not a key\n", 0o600, "not a PEM"},
		{"wrong block", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", 0o600, "not a PEM"},
		{"readable by others", "", 0o644, "lets other users read it"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			data := tt.data
			if data == "" { // a real key, but with a mode that leaks it
				src := t.TempDir()
				if _, _, err := LoadOrCreate(src); err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(Path(src))
				if err != nil {
					t.Fatal(err)
				}
				data = string(b)
			}
			if err := os.WriteFile(Path(dir), []byte(data), tt.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(Path(dir), tt.mode); err != nil {
				t.Fatal(err)
			}
			_, _, err := LoadOrCreate(dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "hint:") {
				t.Fatalf("LoadOrCreate over a bad file: %v, want %q with a hint", err, tt.want)
			}
			after, _ := os.ReadFile(Path(dir))
			if string(after) != data {
				t.Fatal("a bad key file was overwritten")
			}
		})
	}
	t.Run("symlink", func(t *testing.T) {
		dir := t.TempDir()
		target := filepath.Join(t.TempDir(), "elsewhere")
		if err := os.Symlink(target, Path(dir)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := LoadOrCreate(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("symlinked key file: %v", err)
		}
		if _, err := os.Lstat(target); err == nil {
			t.Fatal("a key was written through the symlink")
		}
	})
}

// TestConcurrentCreate: processes starting at once agree on one identity
// (the loser of the race loads the winner's key instead of replacing it).
func TestConcurrentCreate(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, _, err := LoadOrCreate(dir)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = k.DeviceID()
		}()
	}
	testproc.WaitGroup(t, &wg, "the concurrent loads")
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent creation produced different identities: %v", ids)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("left files behind: %v", entries)
	}
}
