package bwrap

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"path/filepath"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/sandbox"
)

// Egress by name (sandbox.Egress): the sandbox already has a network
// namespace of its own with only its loopback (--unshare-net). A resident
// sandbox for runs whose policy lists names also gets the egress socket
// directory mounted read-only at sandbox.EgressMount (served by the
// gateway's proxy for that sandbox alone), its agent relays
// sandbox.EgressAddr to it, and its Landlock rules let it connect to that
// socket and leave TCP to the namespace. Only the agent runs the relay:
// without it a run with a list is refused.

// egressState is the latest egress lease of each box key (its Serve, for
// the sandbox that key starts).
type egressState struct {
	leases sandbox.EgressLeases
}

// egressBox is one sandbox's egress socket.
type egressBox struct {
	dir string
	ln  net.Listener
}

// HoldsEgress implements sandbox.EgressHolder.
func (b *Backend) HoldsEgress() error {
	if b.agentErr != nil {
		return hint.Wrap(fmt.Errorf("the egress relay runs in the resident agent, and it is %w", b.agentErr), "set sandbox.agent to auto; `exechost sandbox doctor` says why the agent is off")
	}
	return nil
}

// listenEgress serves the box's egress socket in a directory of its own
// under the state directory, one per sandbox with a random, short name (a
// socket path is at most 107 bytes; a sandbox that is ending never takes
// the next one's socket with it).
func (b *Backend) listenEgress(eg *sandbox.Egress) (*egressBox, error) {
	var n [6]byte
	if _, err := rand.Read(n[:]); err != nil {
		return nil, fmt.Errorf("egress socket directory: %w", err)
	}
	dir := filepath.Join(b.stateDir, "egress", hex.EncodeToString(n[:]))
	ln, err := sandbox.ListenEgress(dir, eg)
	if err != nil {
		return nil, err
	}
	return &egressBox{dir: dir, ln: ln}, nil
}
