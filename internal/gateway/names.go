package gateway

import (
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
	if id, byName, found := g.reg.nameConflict(self, n, compact(name)); found {
		if byName {
			return bridge.Errorf(bridge.CodeInvalidRequest, "display name %q is already node %s's", name, id).WithHint("pick another with `exechost node run --display-name NAME`")
		}
		return bridge.Errorf(bridge.CodeInvalidRequest, "display name %q looks like node %s's id or fingerprint, so --node %s could reach the wrong node", name, id, name).WithHint("pick another with `exechost node run --display-name NAME`")
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
