package audit

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// The chain is keyed: every line's hash is HMAC-SHA256 over the line with
// a secret kept next to the log (<log>.key, 0600), so someone who can
// rewrite the log but not read the key cannot recompute the hashes after
// changing a record; Verify then fails. The key file also records the
// chain head when it was created: lines up to that one were written before
// keys existed and carry plain SHA-256 hashes, and only they may.

// KeySuffix is appended to the log's path to name its key file.
const KeySuffix = ".key"

// chainKey is the secret and the last unkeyed line's hash ("" when the log
// was empty when the key was created).
type chainKey struct {
	Version int    `json:"version"`
	Key     string `json:"key"`
	Head    string `json:"head"`
	raw     []byte
}

// KeyPath returns the key file of the log at path.
func KeyPath(path string) string { return path + KeySuffix }

// loadChainKey reads the key of the log at path; (nil, nil) when there is
// none.
func loadChainKey(path string) (*chainKey, error) {
	kp := KeyPath(path)
	data, err := os.ReadFile(kp)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read audit chain key: %w", err)
	}
	var k chainKey
	if err := json.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("read audit chain key %s: %w", kp, err)
	}
	if k.raw, err = hex.DecodeString(k.Key); err != nil || len(k.raw) != 32 {
		return nil, fmt.Errorf("read audit chain key %s: not 32 bytes of hex", kp)
	}
	return &k, nil
}

// openChainKey returns the log's key, creating it (0600, never replacing
// one) with head as the last unkeyed line's hash. The caller holds the
// log's write lock, so head is the current chain head.
func openChainKey(path, head string) (*chainKey, error) {
	if k, err := loadChainKey(path); k != nil || err != nil {
		return k, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("create audit chain key: %w", err)
	}
	k := &chainKey{Version: 1, Key: hex.EncodeToString(raw), Head: head, raw: raw}
	data, _ := json.Marshal(k)
	f, err := os.OpenFile(KeyPath(path), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return loadChainKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("create audit chain key: %w", err)
	}
	_, werr := f.Write(append(data, '\n'))
	if err := f.Sync(); werr == nil {
		werr = err
	}
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		os.Remove(KeyPath(path))
		return nil, fmt.Errorf("create audit chain key: %w", werr)
	}
	return k, nil
}

// lineHash is what a line's hash field must hold: HMAC-SHA256 with k, or
// plain SHA-256 without a key.
func lineHash(k *chainKey, body []byte) string {
	if k == nil {
		sum := sha256.Sum256(body)
		return hex.EncodeToString(sum[:])
	}
	m := hmac.New(sha256.New, k.raw)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}
