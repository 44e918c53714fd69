package gateway

import (
	"context"
	"os"
	"time"

	"github.com/exechost/exechost/internal/audit"
	"github.com/exechost/exechost/internal/bridge"
)

// RevocationPoll is how often the gateway looks at credentials.json for a
// revocation (`exechost credentials revoke` edits the file, not the
// daemon): a revoked credential's open connections close within it.
const RevocationPoll = 250 * time.Millisecond

// fileSig is what tells that a file changed: atomicfile replaces it, so
// it is another file (os.SameFile) after every write; size and time
// catch an edit in place.
type fileSig struct {
	fi os.FileInfo // nil: absent
}

func sigOf(path string) fileSig {
	fi, err := os.Stat(path)
	if err != nil {
		return fileSig{}
	}
	return fileSig{fi}
}

func (s fileSig) same(o fileSig) bool {
	if s.fi == nil || o.fi == nil {
		return s.fi == nil && o.fi == nil
	}
	return os.SameFile(s.fi, o.fi) && s.fi.Size() == o.fi.Size() && s.fi.ModTime().Equal(o.fi.ModTime())
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
		if sig.same(last) || g.revokeOff.Load() {
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
