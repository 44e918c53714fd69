package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/atomicfile"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/hint"
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
//
// Two locks keep readers (exec node selection, token checks) off the disk:
// mu guards the live data and is never held across I/O; wmu serialises
// writers, which copy the data under mu, change and write the copy holding
// only wmu, then install it under mu. A writer holds wmu from its copy to
// its install, so no other change can land in between and be lost.
type registry struct {
	path string
	wmu  sync.Mutex // held by update and touch, across the write
	mu   sync.Mutex // guards data; never held across I/O
	data registryData
	// byID indexes data.Nodes (the first record of each id); it is
	// rebuilt whenever data is installed, under mu.
	byID map[string]*nodeRecord
	// names indexes data.Nodes for nameConflict, rebuilt with byID.
	names *nameIndex
	// writing, when set, runs as a write starts (tests hold a write
	// there to check what readers see meanwhile).
	writing func()
}

func openRegistry(stateDir string) (*registry, error) {
	r := &registry{path: filepath.Join(stateDir, RegistryFile)}
	d := registryData{Version: 1}
	raw, err := os.ReadFile(r.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read node registry: %w", err)
	default:
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, hint.Wrap(fmt.Errorf("read node registry %s: %w", r.path, err), "fix or remove it; removing unpairs every node")
		}
	}
	r.install(d, newNameIndex(d.Nodes))
	return r, nil
}

// install makes d the registry's data and indexes it, names being d's
// name index (built before, outside mu); the caller holds mu (or is the
// constructor).
func (r *registry) install(d registryData, names *nameIndex) {
	r.data = d
	r.names = names
	r.byID = make(map[string]*nodeRecord, len(d.Nodes))
	for _, n := range d.Nodes {
		if _, dup := r.byID[n.NodeID]; !dup {
			r.byID[n.NodeID] = n
		}
	}
}

// clone copies d deeply enough that changing the copy's records never
// touches d's.
func (d registryData) clone() registryData {
	c := registryData{Version: d.Version, JoinKeys: append([]joinKey(nil), d.JoinKeys...)}
	c.Nodes = make([]*nodeRecord, len(d.Nodes))
	for i, n := range d.Nodes {
		rec := *n
		c.Nodes[i] = &rec
	}
	return c
}

// update changes the registry: change edits a copy and reports whether it
// changed anything; a changed copy is written (expired join keys dropped)
// and only then installed. An error from change or the write leaves the
// registry as it was.
func (r *registry) update(change func(d *registryData) (changed bool, err error)) error {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.mu.Lock()
	next := r.data.clone()
	r.mu.Unlock()
	changed, err := change(&next)
	if err != nil || !changed {
		return err
	}
	if err := r.write(&next); err != nil {
		return err
	}
	names := newNameIndex(next.Nodes) // not under mu: readers wait for nothing
	r.mu.Lock()
	r.install(next, names)
	r.mu.Unlock()
	return nil
}

// write drops expired join keys from d and writes it; only update calls
// it, holding wmu and not mu.
func (r *registry) write(d *registryData) error {
	if r.writing != nil {
		r.writing()
	}
	now := time.Now().UnixMilli()
	keys := d.JoinKeys[:0]
	for _, k := range d.JoinKeys {
		if k.ExpiresAt > now {
			keys = append(keys, k)
		}
	}
	d.JoinKeys = keys
	data, err := json.MarshalIndent(d, "", "  ")
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
	if n := r.byID[id]; n != nil {
		c := *n
		return &c
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
	return r.update(func(d *registryData) (bool, error) {
		d.Nodes = append(without(d.Nodes, rec.NodeID), &rec)
		return true, nil
	})
}

// without returns nodes minus the record of id (a new slice).
func without(nodes []*nodeRecord, id string) []*nodeRecord {
	var out []*nodeRecord
	for _, n := range nodes {
		if n.NodeID != id {
			out = append(out, n)
		}
	}
	return out
}

// touch updates a paired node's last-seen details in memory; they are
// saved with the next write. It takes wmu so that it cannot land between
// a writer's copy and its install (and be lost); it writes nothing.
func (r *registry) touch(id string, fn func(*nodeRecord)) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.byID[id]; n != nil {
		old := n.DisplayName
		fn(n)
		if n.DisplayName != old {
			r.names.rename(id, old, n.DisplayName)
		}
	}
}

// nameConflict is nameIndex.conflict on the paired nodes.
func (r *registry) nameConflict(self, n, c string) (id string, byName, found bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.names.conflict(self, n, c)
}

// remove deletes a node and saves; it reports whether it existed.
func (r *registry) remove(id string) (existed bool, err error) {
	err = r.update(func(d *registryData) (bool, error) {
		nodes := without(d.Nodes, id)
		existed = len(nodes) != len(d.Nodes)
		d.Nodes = nodes
		return existed, nil
	})
	if err != nil {
		return false, err
	}
	return existed, nil
}

// addJoinKey stores a new join key's hash and saves.
func (r *registry) addJoinKey(hash string, expires time.Time) error {
	return r.update(func(d *registryData) (bool, error) {
		d.JoinKeys = append(d.JoinKeys, joinKey{Hash: hash, ExpiresAt: expires.UnixMilli()})
		return true, nil
	})
}

// bindKey checks that the paired node id (whose token hashes to
// tokenHash) is bound to pub. A record without a key (paired before keys
// existed) is bound to pub and saved before the connection is accepted;
// bound reports that. Any other key is refused.
func (r *registry) bindKey(id, tokenHash, pub string) (bound bool, err error) {
	if r.boundTo(id, tokenHash, pub) {
		// The common case, every reconnect: nothing to change, so no
		// copy of the registry (a copy per connect made a storm of
		// reconnecting nodes quadratic in their number).
		return false, nil
	}
	err = r.update(func(d *registryData) (bool, error) {
		for _, n := range d.Nodes {
			if n.NodeID != id || n.TokenHash != tokenHash {
				continue
			}
			switch n.PublicKey {
			case pub:
				return false, nil
			case "":
				n.PublicKey, bound = pub, true
				return true, nil
			}
			return false, bridge.Errorf(bridge.CodeUnauthorized, "node %s is paired with a different key (fingerprint %s); this connection's key does not match", id, fingerprintOf(n.PublicKey)).WithHint(fmt.Sprintf("a node's key lives in node.key next to node.json; if it was lost, `exechost nodes remove %s` and pair again", id))
		}
		return false, bridge.Errorf(bridge.CodeUnauthorized, "node token rejected for %s: the node was removed or re-paired", id).WithHint("remove \"token\" from node.json and pair again")
	})
	if err != nil {
		return false, err
	}
	return bound, nil
}

// boundTo reports whether id's record has tokenHash and is bound to pub.
func (r *registry) boundTo(id, tokenHash, pub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.byID[id]
	return n != nil && n.TokenHash == tokenHash && n.PublicKey == pub && pub != ""
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
func (r *registry) consumeJoinKey(ref, payload, proof string, rec nodeRecord) error {
	return r.update(func(d *registryData) (bool, error) {
		for _, n := range d.Nodes {
			if n.NodeID == rec.NodeID && (n.PublicKey == "" || n.PublicKey != rec.PublicKey) {
				return false, errPairedOtherKey(rec.NodeID)
			}
		}
		now := time.Now().UnixMilli()
		idx := -1
		for i, k := range d.JoinKeys {
			if k.ExpiresAt > now && len(ref) == 16 && strings.HasPrefix(k.Hash, ref) && bridge.VerifySecretProof(k.Hash, payload, proof) {
				idx = i
			}
		}
		if idx < 0 {
			return false, bridge.Errorf(bridge.CodeUnauthorized, "join key is invalid, expired or already used").WithHint("create a new one with `exechost gateway join-key`")
		}
		d.JoinKeys = append(d.JoinKeys[:idx:idx], d.JoinKeys[idx+1:]...)
		d.Nodes = append(without(d.Nodes, rec.NodeID), &rec)
		return true, nil
	})
}
