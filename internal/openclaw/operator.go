package openclaw

import (
	"context"
	"runtime"

	"github.com/exechost/exechost/internal/bridge"
)

// OperatorScopes are the scopes DialOperator asks for: enough to list and
// approve nodes, invoke them and edit their exec approvals.
var OperatorScopes = []string{"operator.admin", "operator.approvals", "operator.pairing", "operator.read", "operator.write"}

// DialOperator connects to an OpenClaw gateway as an operator client (the
// role OpenClaw's CLI and exec tool use), signing with id. Tests and
// `go run ./bench -openclaw` drive the gateway through it: node.list,
// node.invoke, node.pair.approve, exec.approvals.node.get/set. On a
// loopback gateway OpenClaw pairs a new operator device automatically.
func DialOperator(ctx context.Context, url, token string, id *Identity, version string) (*bridge.Conn, error) {
	return DialOperatorWith(ctx, url, token, id, version, bridge.Options{})
}

// DialOperatorWith is DialOperator with the connection's options: tests
// pass NoPing, since a gateway on a loaded machine can miss a keepalive
// while each of their calls has its own deadline.
func DialOperatorWith(ctx context.Context, url, token string, id *Identity, version string, opts bridge.Options) (*bridge.Conn, error) {
	c, _, err := dial(ctx, dialParams{
		URL: url, Token: token, Identity: id,
		Role: "operator", Scopes: OperatorScopes, ClientID: "cli", ClientMode: "cli",
		Caps: []string{}, Version: version, GOOS: runtime.GOOS,
	}, opts)
	return c, err
}
