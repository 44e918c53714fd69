package gateway

import (
	"slices"
	"strings"
)

// nameIndex answers nameConflict for the paired nodes without a scan: a
// node's connect used to compute every other node's fingerprint and
// compare it, so N nodes reconnecting cost O(N²) (a 10,000-node storm
// spent most of the gateway's CPU there). It is built with the registry's
// data (registry.install) and follows a node's own rename (registry.touch).
type nameIndex struct {
	byName map[string][]string // Normalize(display name) → node ids
	ids    []keyed             // compact(id), sorted
	fps    []keyed             // compact(key fingerprint), sorted
}

// keyed is one compacted id or fingerprint and the node it belongs to.
type keyed struct{ key, id string }

// newNameIndex indexes recs.
func newNameIndex(recs []*nodeRecord) *nameIndex {
	x := &nameIndex{byName: make(map[string][]string, len(recs)), ids: make([]keyed, 0, len(recs)), fps: make([]keyed, 0, len(recs))}
	for _, r := range recs {
		x.addName(r.NodeID, r.DisplayName)
		x.ids = append(x.ids, keyed{compact(r.NodeID), r.NodeID})
		x.fps = append(x.fps, keyed{compact(fingerprintOf(r.PublicKey)), r.NodeID})
	}
	slices.SortFunc(x.ids, cmpKeyed)
	slices.SortFunc(x.fps, cmpKeyed)
	return x
}

func cmpKeyed(a, b keyed) int {
	if c := strings.Compare(a.key, b.key); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

func (x *nameIndex) addName(id, name string) {
	if n := Normalize(name); n != "" {
		x.byName[n] = append(x.byName[n], id)
	}
}

// rename moves id from its old display name to its new one.
func (x *nameIndex) rename(id, old, name string) {
	if n := Normalize(old); n != "" {
		ids := x.byName[n]
		if i := slices.Index(ids, id); i >= 0 {
			ids = slices.Delete(ids, i, i+1)
		}
		if len(ids) == 0 {
			delete(x.byName, n)
		} else {
			x.byName[n] = ids
		}
	}
	x.addName(id, name)
}

// conflict returns the first node other than self, in id order, that a
// display name normalized to n and compacted to c would clash with, and
// whether it clashes by name (checked before the prefix, as for each node
// in nameConflict's order).
func (x *nameIndex) conflict(self, n, c string) (id string, byName, found bool) {
	for _, o := range x.byName[n] {
		if o != self && (!found || o < id) {
			id, byName, found = o, true, true
		}
	}
	if len(c) < MinPrefix {
		return id, byName, found
	}
	for _, list := range [][]keyed{x.ids, x.fps} {
		i, _ := slices.BinarySearchFunc(list, c, func(k keyed, c string) int { return strings.Compare(k.key, c) })
		for ; i < len(list) && strings.HasPrefix(list[i].key, c); i++ {
			if o := list[i].id; o != self && (!found || o < id) {
				id, byName, found = o, false, true
			}
		}
	}
	return id, byName, found
}
