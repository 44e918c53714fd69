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
	"os"
	"path/filepath"

	"github.com/exechost/exechost/internal/atomicfile"
	"github.com/exechost/exechost/internal/state"
)

// gatewayFile is <state>/gateway.json: {"token":"…"}, 0600.
type gatewayFile struct {
	Token string `json:"token"`
}

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

// TokenPath returns where the gateway token lives.
func TokenPath(stateDir string) string { return filepath.Join(stateDir, state.GatewayFile) }

// LoadOrCreateToken returns the gateway token from <state>/gateway.json,
// generating the file (0600) on first use.
func LoadOrCreateToken(stateDir string) (string, error) {
	tok, err := ReadToken(stateDir)
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
	data, _ := json.MarshalIndent(gatewayFile{Token: tok}, "", "  ")
	if err := atomicfile.WriteFile(TokenPath(stateDir), append(data, '\n'), 0o600); err != nil {
		return "", fmt.Errorf("create gateway token: %w", err)
	}
	return tok, nil
}

// ReadToken reads the gateway token, as local CLIs do to connect as agent
// or operator. The file must be ours and not readable by others.
func ReadToken(stateDir string) (string, error) {
	path := TokenPath(stateDir)
	data, err := readPrivate(path, "gateway token", "chmod 600 "+path)
	if err != nil {
		return "", err
	}
	var f gatewayFile
	if err := json.Unmarshal(data, &f); err != nil || f.Token == "" {
		return "", fmt.Errorf("read gateway token %s: not a {\"token\": …} file (hint: delete it and restart the gateway to generate a new one)", path)
	}
	return f.Token, nil
}

// readPrivate reads a secret file (what names it in errors), which must
// be ours and not readable by others; fix is the hint for a loose mode.
func readPrivate(path, what, fix string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", what, path, err)
	}
	if err := state.CheckOwner(fi); err != nil {
		return nil, fmt.Errorf("read %s %s: %w", what, path, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("read %s %s: mode %o lets other users read it (hint: %s)", what, path, fi.Mode().Perm(), fix)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", what, path, err)
	}
	return data, nil
}
