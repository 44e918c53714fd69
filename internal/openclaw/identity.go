package openclaw

import (
	"github.com/exechost/exechost/internal/nodekey"
)

// IdentityFile is the device key's file in the state directory: the same
// Ed25519 key that identifies this machine to an exechost gateway
// (package nodekey), so a machine has one node identity whichever gateway
// it serves. OpenClaw's device id is the same hex sha256 of the raw public
// key.
const IdentityFile = nodekey.FileName

// Identity is this node's device key as OpenClaw's handshake uses it.
type Identity struct{ key *nodekey.Key }

// LoadOrCreateIdentity loads the node key from dir, creating it (0600) on
// first use. A damaged, foreign-owned or group/world-readable key file is
// an error and is never replaced: replacing it would unpair the node.
func LoadOrCreateIdentity(dir string) (*Identity, error) {
	k, _, err := nodekey.LoadOrCreate(dir)
	if err != nil {
		return nil, err
	}
	return &Identity{key: k}, nil
}

// DeviceID is the hex sha256 of the raw public key.
func (id *Identity) DeviceID() string { return id.key.DeviceID() }

// PublicKey is the raw 32-byte public key, base64url without padding.
func (id *Identity) PublicKey() string { return id.key.PublicKeyString() }

// Sign signs OpenClaw's canonical payload; base64url without padding.
func (id *Identity) Sign(payload string) string { return id.key.Sign([]byte(payload)) }
