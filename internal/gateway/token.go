package gateway

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/exechost/exechost/internal/atomicfile"
	"github.com/exechost/exechost/internal/state"
)

// newSecret returns a random token with a recognisable prefix (so a leaked
// one is easy to grep for) and 256 bits of entropy.
func newSecret(prefix string) string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // never happens on supported platforms
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// hashSecret is how tokens and join keys are stored: they carry 256 bits
// of entropy, so a plain SHA-256 is enough and makes a stolen registry
// useless for connecting.
func hashSecret(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// equalSecret compares a presented secret with a stored hash in constant
// time.
func equalSecret(presented, storedHash string) bool {
	if presented == "" || storedHash == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(hashSecret(presented)), []byte(storedHash)) == 1
}

// LoadOrCreateToken returns the gateway token from <state>/gateway.json,
// generating the file (0600) on first use.
func LoadOrCreateToken(stateDir string) (string, error) {
	tok, err := state.ReadToken(stateDir)
	if err == nil {
		return tok, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := state.Ensure(stateDir); err != nil {
		return "", err
	}
	tok = newSecret("ehg_")
	data, _ := json.MarshalIndent(state.TokenFile{Token: tok}, "", "  ")
	if err := atomicfile.WriteFile(state.TokenPath(stateDir), append(data, '\n'), 0o600); err != nil {
		return "", fmt.Errorf("create gateway token: %w", err)
	}
	return tok, nil
}
