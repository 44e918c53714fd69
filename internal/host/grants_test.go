package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/policy"
)

// A grant allows while it lasts and where it is scoped; once the injected
// clock passes expiresAt the same command is a miss again, and the
// decision's reason (which the audit log records) names the expired grant.
func TestGrantsEnd(t *testing.T) {
	if analysisOff {
		t.Skip("decisions of the analysis")
	}
	f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny)
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := start
	f.engine.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(t time.Time) { mu.Lock(); now = t; mu.Unlock() }
	f.addRules(
		approvals.Entry{Pattern: "$BIN/hello", ExpiresAt: start.Add(30 * time.Minute).UnixMilli()},
		approvals.Entry{Pattern: "$BIN/other", Scope: &approvals.Scope{Cwd: f.dir, Session: "s1"}},
	)
	run := func(cmd, cwd, session string) (policy.Decision, error) {
		res, err := f.engine.Run(context.Background(), Request{RawCommand: cmd, Cwd: cwd, SessionKey: session})
		return res.Decision, err
	}
	if _, err := run("hello a", f.dir, ""); err != nil {
		t.Fatalf("within the grant: %v", err)
	}
	set(start.Add(29 * time.Minute))
	if _, err := run("hello a", f.dir, ""); err != nil {
		t.Fatalf("a minute before the end: %v", err)
	}
	set(start.Add(30 * time.Minute))
	d, err := run("hello a", f.dir, "")
	if !errors.Is(err, policy.ErrAllowlistMiss) || !strings.Contains(d.Reason, "expired grant: "+filepath.Join(f.bin, "hello")+" until 2026-11-27T12:30:00Z") {
		t.Fatalf("after the end: err %v, reason %q; want a miss naming the expired grant", err, d.Reason)
	}
	// Scope: the session and the directory (or one below it) must match.
	sub := filepath.Join(f.dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cwd, session string
		ok           bool
	}{{f.dir, "s1", true}, {sub, "s1", true}, {f.dir, "s2", false}, {f.dir, "", false}, {f.bin, "s1", false}} {
		_, err := run("other", c.cwd, c.session)
		if (err == nil) != c.ok {
			t.Errorf("scoped grant in %s, session %q: err %v, want allowed %v", c.cwd, c.session, err, c.ok)
		}
	}
}
