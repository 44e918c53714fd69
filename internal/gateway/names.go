package gateway

import (
	"strings"
	"unicode"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/nodekey"
)

// nameConflict refuses a display name that would make `--node NAME` reach
// another node than the one the operator means: the same normalized name
// as another node's, or (MinPrefix characters or more) a prefix of
// another node's id or key fingerprint — display names are matched before
// id prefixes, so such a name would take that node's traffic. Paired and
// pending nodes other than self count.
func (g *Gateway) nameConflict(self, name string) error {
	n := Normalize(name)
	if n == "" {
		return nil
	}
	c := compact(name)
	clash := func(id string, byName bool) error {
		if byName {
			return bridge.Errorf(bridge.CodeInvalidRequest, "display name %q is already node %s's", name, id).WithHint("pick another with `exechost node run --display-name NAME`")
		}
		return bridge.Errorf(bridge.CodeInvalidRequest, "display name %q looks like node %s's id or fingerprint, so --node %s could reach the wrong node", name, id, name).WithHint("pick another with `exechost node run --display-name NAME`")
	}
	if id, byName, found := g.reg.nameConflict(self, n, c); found {
		return clash(id, byName)
	}
	// Pending nodes are few (MaxPending): a scan.
	type other struct{ id, name, fp string }
	var others []other
	g.mu.Lock()
	for id, nc := range g.pending {
		others = append(others, other{id, nc.info.DisplayName, nodekey.Fingerprint(nc.pub)})
	}
	g.mu.Unlock()
	for _, o := range others {
		if o.id == self {
			continue
		}
		switch {
		case Normalize(o.name) == n:
			return clash(o.id, true)
		case len(c) >= MinPrefix && (strings.HasPrefix(compact(o.id), c) || strings.HasPrefix(compact(o.fp), c)):
			return clash(o.id, false)
		}
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
