package gateway

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/state"
	"github.com/exechost/exechost/internal/testproc"
)

func TestTokenFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	tok, err := LoadOrCreateToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, "ehg_") || len(tok) < 40 {
		t.Fatalf("token %q looks weak", tok)
	}
	fi, err := os.Stat(state.TokenPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("gateway.json mode %o, want 600", fi.Mode().Perm())
	}
	again, err := LoadOrCreateToken(dir)
	if err != nil || again != tok {
		t.Fatalf("second load = %q, %v; want the same token", again, err)
	}
	if err := os.Chmod(state.TokenPath(dir), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := state.ReadToken(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("ReadToken of a world-readable file = %v, want a refusal with a hint", err)
	}
}

func TestSecrets(t *testing.T) {
	a, b := newSecret("x_"), newSecret("x_")
	if a == b {
		t.Fatal("two secrets are equal")
	}
	h := hashSecret(a)
	if !equalSecret(a, h) || equalSecret(b, h) || equalSecret("", h) || equalSecret(a, "") {
		t.Error("equalSecret accepts the wrong secret or an empty one")
	}
}

func TestRegistryPersistsHashesAndJoinKeysPairOnce(t *testing.T) {
	dir := t.TempDir()
	r, err := openRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	tok := newSecret("ehn_")
	if err := r.put(nodeRecord{NodeID: "n1", DisplayName: "one", TokenHash: hashSecret(tok)}); err != nil {
		t.Fatal(err)
	}
	key := newSecret("ehj_")
	if err := r.addJoinKey(hashSecret(key), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	expired := newSecret("ehj_")
	if err := r.addJoinKey(hashSecret(expired), time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, RegistryFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), tok) || strings.Contains(string(data), key) {
		t.Fatal("registry holds a secret in clear")
	}
	// Reopen: what was written is what a restarted gateway sees.
	r, err = openRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rec := r.get("n1"); rec == nil || !equalSecret(tok, rec.TokenHash) {
		t.Fatalf("n1 after reopen = %+v", rec)
	}
	var be *bridge.Error
	if err := r.consumeJoinKey(bridge.SecretRef(expired), "p", bridge.SecretProof(expired, "p"), nodeRecord{NodeID: "late"}); !errors.As(err, &be) || be.Code != bridge.CodeUnauthorized {
		t.Errorf("expired join key = %v", err)
	}
	if err := r.consumeJoinKey(bridge.SecretRef(key), "p", bridge.SecretProof(key, "p"), nodeRecord{NodeID: "n2"}); err != nil {
		t.Fatalf("join key: %v", err)
	}
	if err := r.consumeJoinKey(bridge.SecretRef(key), "p", bridge.SecretProof(key, "p"), nodeRecord{NodeID: "n3"}); !errors.As(err, &be) {
		t.Errorf("join key used twice = %v", err)
	}
	if got := len(r.all()); got != 2 {
		t.Errorf("%d nodes, want n1 and n2", got)
	}
	if ok, err := r.remove("n1"); !ok || err != nil {
		t.Fatalf("remove = %v, %v", ok, err)
	}
	r, _ = openRegistry(dir)
	if r.get("n1") != nil {
		t.Error("removed node is back after reopen")
	}
}

// TestRegistryReadersDoNotWaitForWrites holds a write at its start: reads
// (what exec node selection does) answer meanwhile and do not see the
// change, which takes effect only once written.
func TestRegistryReadersDoNotWaitForWrites(t *testing.T) {
	r, err := openRegistry(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.put(nodeRecord{NodeID: "n1"}); err != nil {
		t.Fatal(err)
	}
	entered, hold := make(chan struct{}), make(chan struct{})
	r.writing = func() { close(entered); <-hold }
	done := make(chan error, 1)
	go func() { done <- r.put(nodeRecord{NodeID: "n2"}) }()
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the write never started")
	}
	read := make(chan []nodeRecord, 1)
	go func() { _ = r.get("n1"); read <- r.all() }()
	select {
	case recs := <-read:
		if len(recs) != 1 || recs[0].NodeID != "n1" {
			t.Errorf("during the write: %+v, want only n1 (a change takes effect once written)", recs)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a read waited for the write")
	}
	close(hold)
	if err := testproc.Recv(t, done, "the held write's result"); err != nil {
		t.Fatal(err)
	}
	if r.get("n2") == nil {
		t.Error("n2 missing after its write")
	}
}

// TestRegistryConcurrentWritersLoseNothing runs pairings, removals, join
// keys and last-seen updates at once: every change is in memory and on
// disk afterwards.
func TestRegistryConcurrentWritersLoseNothing(t *testing.T) {
	dir := t.TempDir()
	r, err := openRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if err := r.put(nodeRecord{NodeID: fmt.Sprintf("gone-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	const n = 24
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(3)
		go func() {
			defer wg.Done()
			if err := r.put(nodeRecord{NodeID: fmt.Sprintf("n%d", i)}); err != nil {
				t.Error(err)
			}
			r.touch(fmt.Sprintf("n%d", i), func(rec *nodeRecord) { rec.DisplayName = "seen" })
		}()
		go func() {
			defer wg.Done()
			if err := r.addJoinKey(hashSecret(fmt.Sprintf("key-%d", i)), time.Now().Add(time.Hour)); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			if i < 8 {
				if _, err := r.remove(fmt.Sprintf("gone-%d", i)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	testproc.WaitGroup(t, &wg, "the concurrent writers")
	// One more write saves the last touches.
	if err := r.addJoinKey(hashSecret("last"), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	reopened, err := openRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, reg := range []*registry{r, reopened} {
		recs := reg.all()
		if len(recs) != n {
			t.Errorf("%d nodes, want %d: %+v", len(recs), n, recs)
		}
		for _, rec := range recs {
			if !strings.HasPrefix(rec.NodeID, "n") || rec.DisplayName != "seen" {
				t.Errorf("record %+v: a removal or a last-seen update was lost", rec)
			}
		}
		if got := len(reg.data.JoinKeys); got != n+1 {
			t.Errorf("%d join keys, want %d", got, n+1)
		}
	}
}

// TestRegistryReconnectCostDoesNotGrow: the checks a connect makes on a
// paired node (bindKey, get, touch, the display-name check) must not copy
// or scan the whole registry, or a storm of n reconnecting nodes costs n²
// (as it did when bindKey copied the registry on every connect, and when
// the name check fingerprinted every node). Counted in allocations,
// which do not depend on the machine's speed.
func TestRegistryReconnectCostDoesNotGrow(t *testing.T) {
	allocs := func(n int) float64 {
		r, err := openRegistry(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		d := registryData{Version: 1}
		for i := range n {
			d.Nodes = append(d.Nodes, &nodeRecord{NodeID: fmt.Sprintf("node-%d", i), TokenHash: "h", PublicKey: "pub"})
		}
		r.install(d, newNameIndex(d.Nodes))
		id := fmt.Sprintf("node-%d", n/2)
		return testing.AllocsPerRun(20, func() {
			if bound, err := r.bindKey(id, "h", "pub"); err != nil || bound {
				t.Fatalf("bindKey = %v, %v; want an already bound key", bound, err)
			}
			if r.get(id) == nil {
				t.Fatal("get found nothing")
			}
			r.touch(id, func(rec *nodeRecord) { rec.LastSeen++ })
			if _, _, found := r.nameConflict(id, "build-box", "buildbox"); found {
				t.Fatal("nameConflict found a clash in a registry without names")
			}
		})
	}
	small, large := allocs(10), allocs(5000)
	if large > small+2 {
		t.Errorf("a reconnect's registry checks allocate %.0f times with 5000 nodes against %.0f with 10: they copy the registry", large, small)
	}
	r, err := openRegistry(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := registryData{Version: 1, Nodes: []*nodeRecord{{NodeID: "a", TokenHash: "h", PublicKey: "pub"}}}
	r.install(d, newNameIndex(d.Nodes))
	if _, err := r.bindKey("a", "h", "other"); err == nil {
		t.Error("bindKey accepted a different key for a bound node")
	}
	if _, err := r.bindKey("a", "wrong", "pub"); err == nil {
		t.Error("bindKey accepted a token that is not the node's")
	}
}
