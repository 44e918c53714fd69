package gateway

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/bridge"
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
	fi, err := os.Stat(TokenPath(dir))
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
	if err := os.Chmod(TokenPath(dir), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadToken(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
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
	if err := r.consumeJoinKey(expired, nodeRecord{NodeID: "late"}); !errors.As(err, &be) || be.Code != bridge.CodeUnauthorized {
		t.Errorf("expired join key = %v", err)
	}
	if err := r.consumeJoinKey(key, nodeRecord{NodeID: "n2"}); err != nil {
		t.Fatalf("join key: %v", err)
	}
	if err := r.consumeJoinKey(key, nodeRecord{NodeID: "n3"}); !errors.As(err, &be) {
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
