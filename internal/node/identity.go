// Package node is the headless node runner (`exechost node run`): it keeps
// the node's identity in node.json, connects to the gateway, pairs
// (interactively or with a join key), pins a wss:// gateway's certificate,
// reconnects with jittered backoff, and answers node.invoke requests —
// system.run through the local host engine, which enforces this machine's
// own exec-approvals.json, plus system.which and remote editing of that
// file with optimistic concurrency.
package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/exechost/exechost/internal/atomicfile"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/state"
)

// IdentityVersion is node.json's schema version.
const IdentityVersion = 1

// Identity is node.json: {version:1, nodeId, token, displayName,
// gateway:{url, tlsFingerprint?, publicKey?}}, mode 0600. The node's key pair is not
// in it: the private key lives in node.key next to it (package nodekey),
// so node.json keeps exactly its documented fields and the key file can
// be guarded on its own. An unpaired node's nodeId is its key's device
// id (hex sha256 of the public key).
type Identity struct {
	Version     int             `json:"version"`
	NodeID      string          `json:"nodeId"`
	Token       string          `json:"token,omitempty"`
	DisplayName string          `json:"displayName"`
	Gateway     IdentityGateway `json:"gateway"`
}

// IdentityGateway is where the node connects, the pinned certificate
// fingerprint (SHA-256 of the leaf certificate, hex) of a wss:// gateway,
// and the gateway's pinned identity key: a server at the URL that does
// not prove it holds that key is obeyed in nothing.
type IdentityGateway struct {
	URL            string `json:"url"`
	TLSFingerprint string `json:"tlsFingerprint,omitempty"`
	PublicKey      string `json:"publicKey,omitempty"`
}

// IdentityPath returns node.json's path.
func IdentityPath(stateDir string) string { return filepath.Join(stateDir, state.NodeFile) }

// LoadIdentity reads node.json, returning a new identity (not yet
// written, without a node id: New derives it from the node's key) when the
// file does not exist.
func LoadIdentity(stateDir string) (*Identity, error) {
	path := IdentityPath(stateDir)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Identity{Version: IdentityVersion, DisplayName: defaultDisplayName()}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read node identity: %w", err)
	}
	if err := state.CheckOwner(fi); err != nil {
		return nil, fmt.Errorf("read node identity %s: %w", path, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read node identity: %w", err)
	}
	var id Identity
	if err := json.Unmarshal(data, &id); err != nil {
		return nil, hint.Wrap(fmt.Errorf("read node identity %s: %w", path, err), "fix the JSON, or move the file away to pair as a new node")
	}
	if id.Version != IdentityVersion {
		return nil, fmt.Errorf("read node identity %s: unsupported version %d (want %d)", path, id.Version, IdentityVersion)
	}
	if id.NodeID == "" {
		return nil, hint.Wrap(fmt.Errorf("read node identity %s: no nodeId", path), "move the file away to pair as a new node")
	}
	return &id, nil
}

// Save writes node.json atomically with mode 0600.
func (id *Identity) Save(stateDir string) error {
	if err := state.Ensure(stateDir); err != nil {
		return err
	}
	data, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return fmt.Errorf("encode node identity: %w", err)
	}
	if err := atomicfile.WriteFile(IdentityPath(stateDir), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("save node identity: %w", err)
	}
	return nil
}

func defaultDisplayName() string {
	h, err := os.Hostname()
	if err != nil || strings.TrimSpace(h) == "" {
		return "node"
	}
	return h
}
