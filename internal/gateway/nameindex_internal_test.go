package gateway

import (
	"crypto/ed25519"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/nodekey"
)

// scanConflict is nameConflict's answer for the paired nodes as it was
// computed before the index: every record, in id order, its fingerprint
// computed, its name compared before its id and fingerprint.
func scanConflict(recs []nodeRecord, self, name string) (id string, byName, found bool) {
	n, c := Normalize(name), compact(name)
	if n == "" {
		return "", false, false
	}
	for _, o := range recs {
		if o.NodeID == self {
			continue
		}
		switch {
		case Normalize(o.DisplayName) == n:
			return o.NodeID, true, true
		case len(c) >= MinPrefix && (strings.HasPrefix(compact(o.NodeID), c) || strings.HasPrefix(compact(fingerprintOf(o.PublicKey)), c)):
			return o.NodeID, false, true
		}
	}
	return "", false, false
}

// TestNameIndexMatchesScan: the index gives the scan's answer on random
// registries full of clashes (shared names, ids and fingerprints with
// common prefixes, an id paired again), after pairings, removals and a
// node's own renames on connect.
func TestNameIndexMatchesScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"build", "Build", "build-1", "gpu box", "GPU_box", "abc123", "abc1234", "", "ab", "laptop"}
	reg, err := openRegistry(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var fps []string
	newRec := func() nodeRecord {
		pub, _, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		fps = append(fps, nodekey.Fingerprint(pub))
		id := fmt.Sprintf("abc%d%x", rng.IntN(3), rng.Uint64())
		if rng.IntN(5) == 0 {
			id = "abc1234" // pairing again under an id that was paired before
		}
		return nodeRecord{NodeID: id, DisplayName: names[rng.IntN(len(names))], PublicKey: nodekey.EncodePublicKey(pub)}
	}
	query := func(round int) {
		all := reg.all()
		queries := append([]string{}, names...)
		for _, r := range all[:min(5, len(all))] {
			queries = append(queries, r.NodeID[:min(len(r.NodeID), 7)], strings.ToUpper(r.NodeID[:min(len(r.NodeID), 9)]))
		}
		for _, fp := range fps[max(0, len(fps)-5):] {
			queries = append(queries, fp[:9], strings.ReplaceAll(fp, ":", "")[:8])
		}
		for _, q := range queries {
			selves := []string{"none"}
			for _, r := range all[:min(3, len(all))] {
				selves = append(selves, r.NodeID)
			}
			for _, self := range selves {
				wid, wby, wok := scanConflict(all, self, q)
				gid, gby, gok := reg.nameConflict(self, Normalize(q), compact(q))
				if Normalize(q) == "" {
					gid, gby, gok = "", false, false
				}
				if wid != gid || wby != gby || wok != gok {
					t.Fatalf("round %d: %q for %s: index (%q, %v, %v), scan (%q, %v, %v)", round, q, self, gid, gby, gok, wid, wby, wok)
				}
			}
		}
	}
	for round := range 60 {
		switch all := reg.all(); {
		case len(all) > 4 && rng.IntN(4) == 0:
			if _, err := reg.remove(all[rng.IntN(len(all))].NodeID); err != nil {
				t.Fatal(err)
			}
		case len(all) > 0 && rng.IntN(3) == 0:
			to := names[rng.IntN(len(names))]
			reg.touch(all[rng.IntN(len(all))].NodeID, func(r *nodeRecord) { r.DisplayName = to })
		default:
			if err := reg.put(newRec()); err != nil {
				t.Fatal(err)
			}
		}
		query(round)
	}
}
