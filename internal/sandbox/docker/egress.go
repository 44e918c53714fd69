package docker

import (
	"fmt"
	"net"
	"path/filepath"
	"sync"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/sandbox"
)

// Egress by name (sandbox.Egress): a container for runs whose policy's
// network is a list is created with network mode none whatever
// sandbox.docker.network says, and gets one way out: a unix socket the
// backend makes for that container alone (egressDir), served by the
// gateway's egress proxy and mounted read-only at egressMount; its
// resident agent relays sandbox.EgressAddr on the container's loopback to
// it. Only the agent can run that relay, so without the agent a run with
// a list is refused (HoldsEgress), never given the container's network.

// egressMount is where a container's egress socket directory appears, and
// egressSocket the socket in it.
const (
	egressMount  = sandbox.EgressMount
	egressSocket = sandbox.EgressSocket
	// egressDirName, under the state directory, holds the sockets; Open
	// removes what a previous gateway left there.
	egressDirName = "egress"
)

// egressState is what the backend keeps for egress: the latest lease of
// each box key (its Serve, for the container that key starts) and the
// socket each egress container's proxy serves, closed with the container.
type egressState struct {
	leases sandbox.EgressLeases
	mu     sync.Mutex
	socks  map[string]net.Listener // by container id
}

// HoldsEgress implements sandbox.EgressHolder: the list needs the
// resident agent, which runs the relay.
func (b *Backend) HoldsEgress() error {
	if err := b.AgentErr(); err != nil {
		return hint.Wrap(fmt.Errorf("the egress relay runs in the resident agent, and it is %w", err), "set sandbox.agent to auto with a statically linked exechost (sandbox.agentBinary); `exechost sandbox doctor` says why the agent is off")
	}
	return nil
}

// listenEgress has eg's proxy serve the box's egress socket, in a
// directory of its own under the state directory (sandbox.ListenEgress):
// one per container, so a container of the key being removed while the
// next one starts never takes the new one's socket with it.
func (b *Backend) listenEgress(eg *sandbox.Egress) (string, net.Listener, error) {
	// A random name, short: a socket path is at most 107 bytes.
	dir := filepath.Join(b.stateDir, egressDirName, nonce()[:12])
	ln, err := sandbox.ListenEgress(dir, eg)
	return dir, ln, err
}

// keepEgress ties ln to container id, to be closed when it is removed.
func (b *Backend) keepEgress(id string, ln net.Listener) {
	b.egr.mu.Lock()
	defer b.egr.mu.Unlock()
	if b.egr.socks == nil {
		b.egr.socks = map[string]net.Listener{}
	}
	b.egr.socks[id] = ln
}

// dropEgress stops serving container id's egress socket.
func (b *Backend) dropEgress(id string) {
	b.egr.mu.Lock()
	ln := b.egr.socks[id]
	delete(b.egr.socks, id)
	b.egr.mu.Unlock()
	if ln != nil {
		sandbox.RemoveEgressDir(ln)
	}
}
