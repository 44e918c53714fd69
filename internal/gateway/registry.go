package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/atomicfile"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/nodekey"
)

// RegistryFile is the gateway's paired-node registry in the state directory.
// It holds token hashes only, never tokens.
const RegistryFile = "nodes.json"

// nodeRecord is one paired node.
type nodeRecord struct {
	NodeID      string `json:"nodeId"`
	DisplayName string `json:"displayName"`
	TokenHash   string `json:"tokenHash"`
	// PublicKey is the node's Ed25519 public key (raw, unpadded
	// base64url) its token is bound to: a connection must prove it holds
	// the matching private key. Empty only for a pairing made before
	// keys existed, until its first connect binds one.
	PublicKey string   `json:"publicKey,omitempty"`
	Platform  string   `json:"platform,omitempty"`
	Version   string   `json:"version,omitempty"`
	Commands  []string `json:"commands,omitempty"`
	RemoteIP  string   `json:"remoteIp,omitempty"`
	PairedAt  int64    `json:"pairedAt"`
	LastSeen  int64    `json:"lastSeen,omitempty"`
}

// joinKey is an unused one-time join key.
type joinKey struct {
	Hash      string `json:"hash"`
	ExpiresAt int64  `json:"expiresAt"`
}

type registryData struct {
	Version  int           `json:"version"`
	Nodes    []*nodeRecord `json:"nodes"`
	JoinKeys []joinKey     `json:"joinKeys,omitempty"`
}

// registry is the persistent part of the node registry: paired nodes and
// unused join keys. Every change is written before it takes effect, so a
// revoked token stays revoked across a restart.
type registry struct {
	path string
	mu   sync.Mutex
	data registryData
}

func openRegistry(stateDir string) (*registry, error) {
	r := &registry{path: filepath.Join(stateDir, RegistryFile), data: registryData{Version: 1}}
	raw, err := os.ReadFile(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read node registry: %w", err)
	}
	if err := json.Unmarshal(raw, &r.data); err != nil {
		return nil, fmt.Errorf("read node registry %s: %w (hint: fix or remove it; removing unpairs every node)", r.path, err)
	}
	return r, nil
}

// saveLocked writes the registry; r.mu must be held.
func (r *registry) saveLocked() error {
	now := time.Now().UnixMilli()
	keys := r.data.JoinKeys[:0]
	for _, k := range r.data.JoinKeys {
		if k.ExpiresAt > now {
			keys = append(keys, k)
		}
	}
	r.data.JoinKeys = keys
	data, err := json.MarshalIndent(r.data, "", "  ")
	if err != nil {
		return fmt.Errorf("encode node registry: %w", err)
	}
	if err := atomicfile.WriteFile(r.path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("write node registry: %w", err)
	}
	return nil
}

func (r *registry) get(id string) *nodeRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.data.Nodes {
		if n.NodeID == id {
			c := *n
			return &c
		}
	}
	return nil
}

func (r *registry) all() []nodeRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]nodeRecord, len(r.data.Nodes))
	for i, n := range r.data.Nodes {
		out[i] = *n
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out
}

// put adds or replaces a node record and saves.
func (r *registry) put(rec nodeRecord) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.data.Nodes
	var nodes []*nodeRecord
	for _, n := range old {
		if n.NodeID != rec.NodeID {
			nodes = append(nodes, n)
		}
	}
	r.data.Nodes = append(nodes, &rec)
	if err := r.saveLocked(); err != nil {
		r.data.Nodes = old
		return err
	}
	return nil
}

// touch updates a paired node's last-seen details in memory; they are
// saved with the next write.
func (r *registry) touch(id string, fn func(*nodeRecord)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.data.Nodes {
		if n.NodeID == id {
			fn(n)
		}
	}
}

// remove deletes a node and saves; it reports whether it existed.
func (r *registry) remove(id string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.data.Nodes
	var nodes []*nodeRecord
	for _, n := range old {
		if n.NodeID != id {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == len(old) {
		return false, nil
	}
	r.data.Nodes = nodes
	if err := r.saveLocked(); err != nil {
		r.data.Nodes = old
		return false, err
	}
	return true, nil
}

// addJoinKey stores a new join key's hash and saves.
func (r *registry) addJoinKey(hash string, expires time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.data.JoinKeys = append(r.data.JoinKeys, joinKey{Hash: hash, ExpiresAt: expires.UnixMilli()})
	return r.saveLocked()
}

// bindKey checks that the paired node id (whose token hashes to
// tokenHash) is bound to pub. A record without a key (paired before keys
// existed) is bound to pub and saved before the connection is accepted;
// bound reports that. Any other key is refused.
func (r *registry) bindKey(id, tokenHash, pub string) (bound bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.data.Nodes {
		if n.NodeID != id || n.TokenHash != tokenHash {
			continue
		}
		switch n.PublicKey {
		case pub:
			return false, nil
		case "":
			n.PublicKey = pub
			if err := r.saveLocked(); err != nil {
				n.PublicKey = ""
				return false, err
			}
			return true, nil
		}
		return false, bridge.Errorf(bridge.CodeUnauthorized, "node %s is paired with a different key (fingerprint %s); this connection's key does not match (hint: a node's key lives in node.key next to node.json; if it was lost, `exechost nodes remove %s` and pair again)", id, fingerprintOf(n.PublicKey), id)
	}
	return false, bridge.Errorf(bridge.CodeUnauthorized, "node token rejected for %s: the node was removed or re-paired (hint: remove \"token\" from node.json and pair again)", id)
}

// fingerprintOf abbreviates a stored public key for messages.
func fingerprintOf(pub string) string {
	if pub == "" {
		return ""
	}
	raw, err := nodekey.ParsePublicKey(pub)
	if err != nil {
		return "?"
	}
	return nodekey.Fingerprint(raw)
}

// consumeJoinKey removes a matching unexpired key and pairs rec in one
// write, so a key can never pair twice. A key pairs a new node (or the
// same key again): it never rebinds an id paired under another key, and
// such an attempt leaves the join key unused.
func (r *registry) consumeJoinKey(key string, rec nodeRecord) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.data.Nodes {
		if n.NodeID == rec.NodeID && (n.PublicKey == "" || n.PublicKey != rec.PublicKey) {
			return errPairedOtherKey(rec.NodeID)
		}
	}
	now := time.Now().UnixMilli()
	idx := -1
	for i, k := range r.data.JoinKeys {
		if k.ExpiresAt > now && equalSecret(key, k.Hash) {
			idx = i
		}
	}
	if idx < 0 {
		return bridge.Errorf(bridge.CodeUnauthorized, "join key is invalid, expired or already used (hint: create a new one with `exechost gateway join-key`)")
	}
	oldKeys, oldNodes := r.data.JoinKeys, r.data.Nodes
	r.data.JoinKeys = append(append([]joinKey(nil), oldKeys[:idx]...), oldKeys[idx+1:]...)
	var nodes []*nodeRecord
	for _, n := range oldNodes {
		if n.NodeID != rec.NodeID {
			nodes = append(nodes, n)
		}
	}
	r.data.Nodes = append(nodes, &rec)
	if err := r.saveLocked(); err != nil {
		r.data.JoinKeys, r.data.Nodes = oldKeys, oldNodes
		return err
	}
	return nil
}
