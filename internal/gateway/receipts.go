package gateway

import (
	"errors"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/nodekey"
	"github.com/exechost/exechost/internal/receipt"
)

// countersign records, signed with the gateway's key, what the gateway
// forwarded to a node for x and what came back: the command's digest, the
// agent, the node's proven key, and the exit code and output digests (or
// the refusal). A verifier holding the gateway's key compares it with the
// node's own receipt of the run (docs/audit.md, "Receipts"). Only node
// runs are countersigned: a host=gateway run's receipt is the gateway's
// own, and the sandbox is its own boundary.
func (g *Gateway) countersign(x *execution, res bridge.SystemRunResult, runErr error) {
	l := g.opts.Receipts
	if l == nil || x.nc == nil {
		return
	}
	r := receipt.Receipt{
		Kind: receipt.KindCountersign, Host: "gateway", RunID: x.run.id,
		AgentID: x.key.Agent, SessionKey: x.key.Session,
		CommandSHA256: receipt.SHA256String(x.p.Command),
		Peer:          &receipt.Peer{NodeID: x.nc.id, Key: nodekey.EncodePublicKey(x.nc.pub)},
	}
	switch {
	case runErr == nil:
		code := res.ExitCode
		r.Event, r.ExitCode, r.TimedOut = "finished", &code, res.TimedOut
		r.Output = &receipt.Output{
			StdoutSHA256: receipt.SHA256String(res.Stdout), StdoutBytes: len(res.Stdout),
			StderrSHA256: receipt.SHA256String(res.Stderr), StderrBytes: len(res.Stderr),
			Truncated: res.Truncated, DroppedBytes: res.DroppedBytes,
		}
	default:
		be := bridge.AsError(runErr)
		r.Event, r.Error = "denied", string(be.Code)
		if be.Code != bridge.CodeDenied {
			r.Event = "failed"
		}
		var u *unavailableError
		if errors.As(runErr, &u) {
			return // never reached the node
		}
	}
	// In the file before the agent has the result; the fdatasync follows
	// off its path (receipt.Log.Write).
	id := x.run.id
	_, err := l.Write(r, func(err error) {
		if err != nil {
			g.log.Error("countersignature not synced", "run", id, "err", err)
		}
	})
	if err != nil {
		g.log.Error("countersignature not written", "run", id, "err", err)
	}
}
