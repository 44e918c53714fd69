package approverui

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/exechost/exechost/internal/state"
)

// Files NodeNames reads: this machine's node identity and, on a gateway's
// state directory, its registry of paired nodes. Only their nodeId and
// displayName fields are read (package node and package gateway own the
// formats; neither may be imported from here).
const (
	nodeIdentityFile = state.NodeFile // {"nodeId", "displayName", …}
	nodeRegistryFile = "nodes.json"   // {"nodes": [{"nodeId", "displayName", …}]}
)

// NodeNames maps node ids to display names as far as stateDir knows
// them: the node paired from it (node.json) and, when it is a gateway's,
// every node paired with that gateway (nodes.json). Files that are
// missing or unreadable give no names: an id is then shown short, never
// an error in front of a human deciding a prompt.
func NodeNames(stateDir string) map[string]string {
	names := map[string]string{}
	if stateDir == "" {
		return names
	}
	type rec struct {
		NodeID      string `json:"nodeId"`
		DisplayName string `json:"displayName"`
	}
	var reg struct {
		Nodes []rec `json:"nodes"`
	}
	if b, err := os.ReadFile(filepath.Join(stateDir, nodeRegistryFile)); err == nil && json.Unmarshal(b, &reg) == nil {
		for _, n := range reg.Nodes {
			if n.NodeID != "" && n.DisplayName != "" {
				names[n.NodeID] = n.DisplayName
			}
		}
	}
	var self rec
	if b, err := os.ReadFile(filepath.Join(stateDir, nodeIdentityFile)); err == nil && json.Unmarshal(b, &self) == nil && self.NodeID != "" && self.DisplayName != "" {
		names[self.NodeID] = self.DisplayName
	}
	return names
}

// NodeLabelNamed is NodeLabel with the node's display name when names
// has one: "build-box, 1a2b3c4d…", the name to read and the id's first
// characters, which `--node` also takes.
func NodeLabelNamed(id string, names map[string]string) string {
	short := NodeLabel(id)
	if name := names[id]; name != "" && name != id {
		return name + ", " + short
	}
	return short
}
