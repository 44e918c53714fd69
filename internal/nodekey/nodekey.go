// Package nodekey is a node's (device's) identity: an Ed25519 key pair kept
// in the state directory. The private key never leaves the file; the
// gateway knows the node by its public key, and every connection proves
// possession by signing the gateway's per-connection challenge.
//
// The shapes follow OpenClaw's device identity so the two can interoperate:
// the device id is the hex SHA-256 of the raw 32-byte public key, and the
// public key and signatures travel as unpadded base64url.
//
// The package is a leaf (it knows nothing of the wire protocol) so every
// node implementation — `exechost node run`, an OpenClaw-compatible node —
// uses the same key file and the same checks.
package nodekey

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"filippo.io/edwards25519"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/state"
)

// FileName is the key file's name in the state directory, next to
// node.json. It holds the private key as PEM ("PRIVATE KEY", PKCS #8),
// mode 0600.
const FileName = "node.key"

// pemType is the PEM block type of the key file.
const pemType = "PRIVATE KEY"

// FingerprintBytes is how much of the device id the short fingerprint
// shows: 8 bytes (64 bits) is short enough to read aloud and far too long
// to grind a look-alike key for.
const FingerprintBytes = 8

// Key is a node's key pair.
type Key struct {
	priv ed25519.PrivateKey
}

// Generate returns a new random key (not saved).
func Generate() (*Key, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate node key: %w", err)
	}
	return &Key{priv: priv}, nil
}

// Path returns the key file's path in dir.
func Path(dir string) string { return filepath.Join(dir, FileName) }

// LoadOrCreate returns the key in dir/node.key, generating and saving one
// (0600) when the file does not exist. created reports whether it did.
func LoadOrCreate(dir string) (k *Key, created bool, err error) {
	return LoadOrCreateFile(Path(dir))
}

// LoadOrCreateFile is LoadOrCreate for an explicit path. A file that
// exists but cannot be used (another owner, readable by others, not a
// key) is an error and is never overwritten: replacing it would silently
// give the node a new identity.
func LoadOrCreateFile(path string) (k *Key, created bool, err error) {
	k, err = Load(path)
	if err == nil {
		return k, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	if err := state.Ensure(filepath.Dir(path)); err != nil {
		return nil, false, err
	}
	k, err = Generate()
	if err != nil {
		return nil, false, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k.priv)
	if err != nil {
		return nil, false, fmt.Errorf("encode node key: %w", err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: pemType, Bytes: der})
	// Write a temporary file and link it into place: link fails when the
	// name exists, so two processes starting at once never replace each
	// other's key — the loser loads the winner's.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".node.key-*")
	if err != nil {
		return nil, false, fmt.Errorf("save node key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, false, fmt.Errorf("save node key: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return nil, false, fmt.Errorf("save node key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, false, fmt.Errorf("save node key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, false, fmt.Errorf("save node key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			k, err := Load(path)
			return k, false, err
		}
		return nil, false, fmt.Errorf("save node key %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return k, true, nil
}

// Load reads a key file. The error wraps fs.ErrNotExist when there is
// none.
func Load(path string) (*Key, error) {
	data, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// LoadPublic returns the raw public key of the key file at path, with
// Load's checks and errors: what a client needs to pin a gateway whose
// state it can read. It is Load(path).PublicKey() without the cost of a
// process's first Ed25519 private key (ParsePublic).
func LoadPublic(path string) ([]byte, error) {
	data, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePublic(data, path)
}

// readKeyFile reads the key file at path, refusing what Load refuses: a
// symlink or other non-regular file, another owner's file, and one other
// users can read.
func readKeyFile(path string) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("read node key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, hint.Wrap(fmt.Errorf("read node key %s: not a regular file", path), "a symlink is refused; move it away to create a new identity")
	}
	if err := state.CheckOwner(fi); err != nil {
		return nil, fmt.Errorf("read node key %s: %w", path, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, hint.Wrap(fmt.Errorf("read node key %s: mode %o lets other users read it", path, fi.Mode().Perm()), fmt.Sprintf("chmod 600 %s, and consider the key leaked: remove the node from the gateway and pair again", path))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read node key: %w", err)
	}
	return data, nil
}

// Parse decodes a key file's contents; name is used in errors.
func Parse(data []byte, name string) (*Key, error) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != pemType {
		return nil, hint.Wrap(fmt.Errorf("read node key %s: not a PEM %q block", name, pemType), "the file is damaged; restore it, or move it away and pair this node again")
	}
	pk, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, hint.Wrap(fmt.Errorf("read node key %s: %w", name, err), "the file is damaged; restore it, or move it away and pair this node again")
	}
	priv, ok := pk.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("read node key %s: a %T, not an Ed25519 key", name, pk)
	}
	return &Key{priv: priv}, nil
}

// pkcs8Ed25519Prefix is the DER MarshalPKCS8PrivateKey writes before an
// Ed25519 seed (RFC 8410: version 0, id-Ed25519 without parameters, the
// seed as an OCTET STRING inside the private key OCTET STRING). Every key
// this package saves is this prefix and the 32-byte seed.
const pkcs8Ed25519Prefix = "\x30\x2e\x02\x01\x00\x30\x05\x06\x03\x2b\x65\x70\x04\x22\x04\x20"

// ParsePublic returns the raw public key of a key file's contents: the
// same key, or the same error, as Parse(data, name) then PublicKey.
//
// The public key is derived from the seed by a variable-base scalar
// multiplication rather than by crypto/ed25519, whose first private key in
// a process computes the base point's whole precomputed table (about
// 1.5 ms here, on every CLI call that pins a local gateway); the table
// only pays off for a process that signs. A file that is not exactly the
// layout this package writes takes Parse's way.
func ParsePublic(data []byte, name string) ([]byte, error) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != pemType || len(b.Bytes) != len(pkcs8Ed25519Prefix)+ed25519.SeedSize ||
		string(b.Bytes[:len(pkcs8Ed25519Prefix)]) != pkcs8Ed25519Prefix {
		k, err := Parse(data, name)
		if err != nil {
			return nil, err
		}
		return k.PublicKey(), nil
	}
	h := sha512.Sum512(b.Bytes[len(pkcs8Ed25519Prefix):])
	s, err := edwards25519.NewScalar().SetBytesWithClamping(h[:32])
	if err != nil {
		return nil, fmt.Errorf("read node key %s: %w", name, err)
	}
	return new(edwards25519.Point).ScalarMult(s, edwards25519.NewGeneratorPoint()).Bytes(), nil
}

// PublicKey returns the raw 32-byte public key.
func (k *Key) PublicKey() []byte { return []byte(k.priv.Public().(ed25519.PublicKey)) }

// PublicKeyString returns the public key as unpadded base64url, as it
// travels on the wire and is stored in the gateway's registry.
func (k *Key) PublicKeyString() string { return EncodePublicKey(k.PublicKey()) }

// DeviceID returns the hex SHA-256 of the raw public key: a new node's id.
func (k *Key) DeviceID() string { return DeviceID(k.PublicKey()) }

// Fingerprint returns the short fingerprint an operator compares before
// approving the node.
func (k *Key) Fingerprint() string { return Fingerprint(k.PublicKey()) }

// Sign signs msg; the signature is unpadded base64url.
func (k *Key) Sign(msg []byte) string {
	return base64.RawURLEncoding.EncodeToString(ed25519.Sign(k.priv, msg))
}

// DeviceID returns the hex SHA-256 of a raw public key.
func DeviceID(pub []byte) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:])
}

// Fingerprint returns the first FingerprintBytes of the device id as
// colon-separated groups of four hex digits ("3f2a:91c0:5b7e:d418").
func Fingerprint(pub []byte) string {
	id := DeviceID(pub)[:2*FingerprintBytes]
	var parts []string
	for i := 0; i < len(id); i += 4 {
		parts = append(parts, id[i:i+4])
	}
	return strings.Join(parts, ":")
}

// EncodePublicKey encodes a raw public key as unpadded base64url.
func EncodePublicKey(pub []byte) string { return base64.RawURLEncoding.EncodeToString(pub) }

// ParsePublicKey decodes an unpadded base64url raw Ed25519 public key.
func ParsePublicKey(s string) ([]byte, error) {
	pub, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public key: %d bytes, want %d", len(pub), ed25519.PublicKeySize)
	}
	return pub, nil
}

// Verify reports whether sig (unpadded base64url) is pub's signature of
// msg. Anything malformed is false.
func Verify(pub, msg []byte, sig string) bool {
	if len(pub) != ed25519.PublicKeySize {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || len(raw) != ed25519.SignatureSize {
		return false
	}
	return ed25519.Verify(ed25519.PublicKey(pub), msg, raw)
}
