package state

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/exechost/exechost/internal/hint"
)

// Files of the gateway's state directory that its clients read too.
const (
	// KeyFile is the gateway's identity key, whose public half clients pin.
	KeyFile = "gateway.key"
	// CredentialsDir is where `exechost credentials issue` writes the
	// credential files it issues, by default.
	CredentialsDir = "credentials"
)

// TokenPath returns where the gateway token of stateDir lives.
func TokenPath(stateDir string) string { return filepath.Join(stateDir, GatewayFile) }

// KeyPath returns the gateway's identity key file in stateDir.
func KeyPath(stateDir string) string { return filepath.Join(stateDir, KeyFile) }

// CredentialPath returns the default credential file of name in stateDir.
func CredentialPath(stateDir, name string) string {
	return filepath.Join(stateDir, CredentialsDir, name+".json")
}

// ReadPrivate reads a secret file (what names it in errors), which must
// be ours and not readable by others; fix is the hint for a loose mode.
func ReadPrivate(path, what, fix string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", what, path, err)
	}
	if err := CheckOwner(fi); err != nil {
		return nil, fmt.Errorf("read %s %s: %w", what, path, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, hint.Wrap(fmt.Errorf("read %s %s: mode %o lets other users read it", what, path, fi.Mode().Perm()), fix)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", what, path, err)
	}
	return data, nil
}

// TokenFile is the content of <state>/gateway.json.
type TokenFile struct {
	Token string `json:"token"`
}

// ReadToken reads the gateway token of stateDir, as local clients do to
// connect as agent or operator. The file must be ours and not readable
// by others.
func ReadToken(stateDir string) (string, error) {
	path := TokenPath(stateDir)
	data, err := ReadPrivate(path, "gateway token", "chmod 600 "+path)
	if err != nil {
		return "", err
	}
	var f TokenFile
	if err := json.Unmarshal(data, &f); err != nil || f.Token == "" {
		return "", hint.Wrap(fmt.Errorf("read gateway token %s: not a {\"token\": …} file", path), "delete it and restart the gateway to generate a new one")
	}
	return f.Token, nil
}
