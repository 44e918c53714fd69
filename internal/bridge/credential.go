package bridge

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/state"
)

// InvokeMargin is added to a command's own timeout for the gateway's wait
// on a node's answer; a client waiting on the gateway allows it too.
const InvokeMargin = 10 * time.Second

// DefaultExecTimeout bounds a command that carries no timeout.
const DefaultExecTimeout = 30 * time.Minute

// credentialIDPattern is what a credential id on the wire may look like.
var credentialIDPattern = regexp.MustCompile(`^cr_[0-9a-f]{16}$`)

// ValidCredentialID reports whether id has the form of a credential id.
func ValidCredentialID(id string) bool { return credentialIDPattern.MatchString(id) }

// CredentialFile is a client credential as its holder keeps it: the
// private key and the gateway it belongs to (URL and pinned public key),
// mode 0600. The gateway writes it once (`exechost credentials issue`);
// clients read it with ReadCredentialFile.
type CredentialFile struct {
	Version    int    `json:"version"`
	ID         string `json:"id"`
	Name       string `json:"name"`
	Role       string `json:"role"`
	Agent      string `json:"agent,omitempty"`
	PrivateKey string `json:"privateKey"`
	GatewayKey string `json:"gatewayKey"`
	GatewayURL string `json:"gatewayUrl,omitempty"`
}

// CredentialID implements CredentialSigner.
func (f *CredentialFile) CredentialID() string { return f.ID }

// Sign implements CredentialSigner.
func (f *CredentialFile) Sign(msg []byte) string {
	seed, _ := base64.RawURLEncoding.DecodeString(f.PrivateKey) // checked by ReadCredentialFile
	return base64.RawURLEncoding.EncodeToString(ed25519.Sign(ed25519.NewKeyFromSeed(seed), msg))
}

// ReadCredentialFile reads a credential file; it must be ours and not
// readable by others.
func ReadCredentialFile(path string) (*CredentialFile, error) {
	data, err := state.ReadPrivate(path, "credential", "chmod 600 "+path+", and consider it leaked: revoke it and issue a new one")
	if err != nil {
		return nil, err
	}
	var cf CredentialFile
	if err := json.Unmarshal(data, &cf); err != nil {
		return nil, fmt.Errorf("read credential %s: %w", path, err)
	}
	seed, err := base64.RawURLEncoding.DecodeString(cf.PrivateKey)
	if err != nil || len(seed) != ed25519.SeedSize || !ValidCredentialID(cf.ID) {
		return nil, hint.Wrap(fmt.Errorf("read credential %s: not a credential file", path), "issue one with `exechost credentials issue`")
	}
	return &cf, nil
}
