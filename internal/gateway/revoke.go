package gateway

import (
	"context"
	"os"
	"syscall"
	"time"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
)

// RevocationPoll is how often the gateway looks at credentials.json for a
// revocation (`exechost credentials revoke` edits the file, not the
// daemon): a revoked credential's open connections close within it.
const RevocationPoll = 250 * time.Millisecond

// fileSig is what tells that a file changed: atomicfile replaces it, so
// its inode changes with every write.
type fileSig struct {
	ino, size int64
	mtime     time.Time
	exists    bool
}

func sigOf(path string) fileSig {
	fi, err := os.Stat(path)
	if err != nil {
		return fileSig{}
	}
	s := fileSig{size: fi.Size(), mtime: fi.ModTime(), exists: true}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino = int64(st.Ino)
	}
	return s
}

// watchRevocations closes the connections of credentials no longer in
// credentials.json, each time the file changes, until ctx ends. An
// unreadable file closes every credential's connections: a login is
// refused then too (verifyCredential), and a revocation must not be
// missed because the list could not be read.
func (g *Gateway) watchRevocations(ctx context.Context, every time.Duration) {
	path := credentialsPath(g.opts.StateDir)
	last := sigOf(path)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sig := sigOf(path)
		if sig == last || g.revokeOff.Load() {
			continue
		}
		last = sig
		g.cutRevoked()
	}
}

// cutRevoked closes every client connection whose credential is not
// (any longer) in the list.
func (g *Gateway) cutRevoked() {
	d, err := readCredentials(g.opts.StateDir)
	valid := map[string]bool{}
	if err != nil {
		g.log.Error("credentials unreadable; closing every credential's connections", "err", err)
	} else {
		for _, r := range d.Credentials {
			valid[r.ID] = true
		}
	}
	g.mu.Lock()
	var cut []*bridge.Conn
	var who []caller
	for c, w := range g.clients {
		if w.credential != "" && !valid[w.credential] {
			cut, who = append(cut, c), append(who, w)
		}
	}
	g.mu.Unlock()
	for i, c := range cut {
		g.log.Info("closing a revoked credential's connection", "credential", who[i].credential, "name", who[i].name)
		g.auditRevokedCut(who[i])
		c.Close("credential " + who[i].credential + " was revoked")
	}
}

// auditRevokedCut records a connection closed for its revoked credential.
func (g *Gateway) auditRevokedCut(who caller) {
	_ = g.auditEvent(withCaller(context.Background(), who), audit.Record{
		Event: audit.EventDecision, AgentID: who.agent, DecidedBy: "gateway",
		Reason:        "connection closed: credential " + who.credential + " was revoked",
		GatewayFields: audit.GatewayFields{Action: audit.ActionCredentialRevoke, ReasonCode: audit.ReasonRevoked},
	})
}
