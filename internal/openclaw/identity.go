package openclaw

// Everything about the node's key pair lives in this one file behind four
// small functions (LoadOrCreateIdentity, DeviceID, PublicKey, Sign), so that
// switching to exechost's shared node-identity package is a change here
// only.

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/exechost/exechost/internal/atomicfile"
	"github.com/exechost/exechost/internal/state"
)

// IdentityFile is the node's OpenClaw device key in the state directory
// (0600). It is separate from node.json because an OpenClaw gateway pairs
// the key, not exechost's own node id.
const IdentityFile = "openclaw-device.json"

// Identity is the node's Ed25519 device key pair. OpenClaw derives the
// device id from the public key, so the same file always pairs as the same
// device.
type Identity struct {
	priv ed25519.PrivateKey
}

// identityFile is the on-disk shape: the 32-byte seed, base64url.
type identityFile struct {
	Version int    `json:"version"`
	Seed    string `json:"seed"`
}

// LoadOrCreateIdentity reads <dir>/openclaw-device.json, creating it (0600,
// atomically) with a fresh key when absent. A file that exists but cannot
// be read or parsed is an error and is never overwritten: replacing it
// would silently unpair the node.
func LoadOrCreateIdentity(dir string) (*Identity, error) {
	path := filepath.Join(dir, IdentityFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		fi, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("stat %s: %w", path, err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("%s is readable by others (mode %o) (hint: chmod 600 %s)", path, fi.Mode().Perm(), path)
		}
		if err := state.CheckOwner(fi); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		var f identityFile
		if err := json.Unmarshal(data, &f); err != nil {
			return nil, fmt.Errorf("parse %s: %w (hint: move the file away to pair as a new device)", path, err)
		}
		seed, err := base64.RawURLEncoding.DecodeString(f.Seed)
		if err != nil || len(seed) != ed25519.SeedSize || f.Version != 1 {
			return nil, fmt.Errorf("parse %s: want version 1 and a %d-byte base64url seed (hint: move the file away to pair as a new device)", path, ed25519.SeedSize)
		}
		return &Identity{priv: ed25519.NewKeyFromSeed(seed)}, nil
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if err := state.Ensure(dir); err != nil {
		return nil, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate device key: %w", err)
	}
	out, err := json.MarshalIndent(identityFile{Version: 1, Seed: base64.RawURLEncoding.EncodeToString(priv.Seed())}, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(path, append(out, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &Identity{priv: priv}, nil
}

// DeviceID is OpenClaw's device id: hex SHA-256 of the raw 32-byte public
// key.
func (id *Identity) DeviceID() string {
	sum := sha256.Sum256(id.priv.Public().(ed25519.PublicKey))
	return hex.EncodeToString(sum[:])
}

// PublicKey is the raw public key, base64url without padding, as the
// connect frame's device.publicKey carries it.
func (id *Identity) PublicKey() string {
	return base64.RawURLEncoding.EncodeToString(id.priv.Public().(ed25519.PublicKey))
}

// Sign signs payload and returns the signature base64url without padding.
func (id *Identity) Sign(payload string) string {
	return base64.RawURLEncoding.EncodeToString(ed25519.Sign(id.priv, []byte(payload)))
}
