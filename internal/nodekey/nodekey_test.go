package nodekey

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"io/fs"
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

// keyFile returns a key file's contents for k, as LoadOrCreate saves it.
func keyFile(t testing.TB, priv any) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemType, Bytes: der})
}

// TestParsePublic: the public key ParsePublic derives is the one
// crypto/ed25519 derives, for saved keys, and a file this package did not
// write (another key type, a damaged one) gets Parse's answer.
func TestParsePublic(t *testing.T) {
	for range 200 {
		k, err := Generate()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParsePublic(keyFile(t, k.priv), "k")
		if err != nil || !bytes.Equal(got, k.PublicKey()) {
			t.Fatalf("ParsePublic = %x, %v; want %x", got, err, k.PublicKey())
		}
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{keyFile(t, ec), []byte("not a key"), pem.EncodeToMemory(&pem.Block{Type: pemType, Bytes: []byte{0x30, 0x2e}})} {
		_, want := Parse(data, "k")
		if _, err := ParsePublic(data, "k"); err == nil || want == nil || err.Error() != want.Error() {
			t.Errorf("ParsePublic(%q) = %v, want Parse's %v", data, err, want)
		}
	}
	dir := t.TempDir()
	k, _, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := LoadPublic(Path(dir)); err != nil || !bytes.Equal(got, k.PublicKey()) {
		t.Fatalf("LoadPublic = %x, %v; want %x", got, err, k.PublicKey())
	}
	if _, err := LoadPublic(filepath.Join(dir, "absent")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadPublic of no file: %v, want fs.ErrNotExist", err)
	}
}

// FuzzParsePublic holds ParsePublic to Parse on any file contents: the
// same public key or the same error.
func FuzzParsePublic(f *testing.F) {
	k, err := Generate()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(keyFile(f, k.priv))
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ParsePublic(data, "k")
		want, werr := Parse(data, "k")
		switch {
		case werr != nil:
			if err == nil || err.Error() != werr.Error() {
				t.Fatalf("ParsePublic = %x, %v; Parse failed: %v", got, err, werr)
			}
		case err != nil || !bytes.Equal(got, want.PublicKey()):
			t.Fatalf("ParsePublic = %x, %v; Parse's key %x", got, err, want.PublicKey())
		}
	})
}
