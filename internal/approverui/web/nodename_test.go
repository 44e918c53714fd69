package web

import (
	"context"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/node"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/testproc"
)

// TestHostLineNamesTheNode: a prompt from this machine's paired node shows
// the node's display name (from node.json, written by package node itself)
// beside its id's first characters; a node the state directory does not
// know (the control) keeps the short id alone.
func TestHostLineNamesTheNode(t *testing.T) {
	dir := t.TempDir()
	known := strings.Repeat("ab", 32)
	unknown := strings.Repeat("cd", 32)
	id := &node.Identity{Version: node.IdentityVersion, NodeID: known, DisplayName: "build-box"}
	if err := id.Save(dir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := prompt.NewBroker()
	u, err := Start(ctx, Options{Addr: "127.0.0.1:0", Broker: b, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	c := login(t, u)
	changes, unsub := b.Subscribe()
	defer unsub()
	for _, n := range []string{known, unknown} {
		go b.Submit(ctx, prompt.Pending{ID: "p-" + n[:4], Request: prompt.Request{Command: "ls", Host: "node", NodeID: n, Choices: []string{"allow-once", "deny"}}})
		testproc.Recv(t, changes, "the prompt's arrival")
	}
	var list pendingList
	c.get("api/pending", &list)
	got := map[string]string{}
	for _, p := range list.Pending {
		got[p.ID] = p.NodeID
	}
	if want := "build-box, abababab…"; got["p-abab"] != want {
		t.Errorf("host line of this machine's node = %q, want %q", got["p-abab"], want)
	}
	if want := "cdcdcdcd…"; got["p-cdcd"] != want {
		t.Errorf("host line of an unknown node = %q, want %q", got["p-cdcd"], want)
	}
}
