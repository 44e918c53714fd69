package gateway

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/exechost/exechost/internal/bridge"
)

// nameConflict refuses a display name that would make `--node NAME` reach
// another node than the one the operator means: the same normalized name
// as another paired node's, or (MinPrefix characters or more) a prefix of
// another paired node's id or key fingerprint — display names are matched
// before id prefixes, so such a name would take that node's traffic.
// Only paired nodes (which authenticated) reserve names: a stranger's
// pending connection does not keep a name from a real node, and approve
// checks the pending node's name again against the nodes paired by then.
func (g *Gateway) nameConflict(self, name string) error {
	n := Normalize(name)
	if n == "" {
		return nil
	}
	c := compact(name)
	// The other node by its id's first characters: a 64-hex id is not
	// read. The fix names both ways out: another name for this node, or
	// removing the other one when it is this machine paired before (a
	// second state directory, a cloned VM).
	if id, byName, found := g.reg.nameConflict(self, n, c); found {
		short := id
		if len(short) > 12 {
			short = short[:8] + "…"
		}
		if byName {
			return bridge.Errorf(bridge.CodeInvalidRequest, "display name %q is already taken by node %s", name, short).
				WithHint(fmt.Sprintf("give this node another name with `exechost node run --display-name NAME`; or, if node %s is this machine paired before (another state directory, a cloned VM), run `exechost nodes remove %s` on the gateway first", short, id))
		}
		return bridge.Errorf(bridge.CodeInvalidRequest, "display name %q looks like node %s's id or fingerprint, so --node %s could reach the wrong node", name, short, name).WithHint("give this node another name with `exechost node run --display-name NAME`")
	}
	return nil
}

// compact is s in lower case with only its letters and digits: how an id,
// a fingerprint and a name are compared for look-alikes.
func compact(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}
