package sandbox

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/runner"
)

// plainBackend holds no egress list (it does not implement EgressHolder).
type plainBackend struct{}

func (plainBackend) Name() string { return "plain" }
func (plainBackend) Exec(context.Context, Request) (runner.Result, error) {
	return runner.Result{}, nil
}
func (plainBackend) Close(context.Context) error { return nil }

// holder holds a list when err is nil.
type holder struct {
	plainBackend
	err error
}

func (h holder) HoldsEgress() error { return h.err }

func TestCheckEgressFailsClosed(t *testing.T) {
	eg := &Egress{Key: "k", Env: map[string]string{"HTTP_PROXY": "http://r:t@" + EgressAddr}, Serve: func(ln net.Listener) error { return ln.Close() }}
	with := Request{AgentID: "a", Egress: eg}
	if err := CheckEgress(plainBackend{}, with); !errors.Is(err, ErrNoEgress) || !strings.Contains(err.Error(), "plain") {
		t.Errorf("a backend without EgressHolder: %v, want ErrNoEgress naming it", err)
	}
	if err := CheckEgress(holder{err: errors.New("agent off")}, with); !errors.Is(err, ErrNoEgress) || !strings.Contains(err.Error(), "agent off") {
		t.Errorf("a holder that cannot now: %v", err)
	}
	if err := CheckEgress(holder{}, with); err != nil {
		t.Errorf("a holder: %v", err)
	}
	if err := CheckEgress(plainBackend{}, Request{AgentID: "a"}); err != nil {
		t.Errorf("no list: %v", err)
	}
}

func TestEgressRunEnvAndScope(t *testing.T) {
	eg := &Egress{Key: "k1", Env: map[string]string{"HTTP_PROXY": "http://r:t@" + EgressAddr, "NO_PROXY": ""}}
	req := Request{AgentID: "a", SessionKey: "s", Env: map[string]string{"HTTP_PROXY": "http://elsewhere", "X": "1"}, Egress: eg}
	env := RunEnv(req)
	if env["HTTP_PROXY"] != eg.Env["HTTP_PROXY"] || env["X"] != "1" || req.Env["HTTP_PROXY"] != "http://elsewhere" {
		t.Errorf("RunEnv = %v (request env %v): the lease's variables win, the request's map is not changed", env, req.Env)
	}
	plain := ScopeKey(ScopeShared, Request{AgentID: "a"})
	k1 := ScopeKey(ScopeShared, req)
	req.Egress = &Egress{Key: "k2"}
	if k1 == plain || k1 == ScopeKey(ScopeShared, req) {
		t.Errorf("scope keys %q %q %q: runs of different egress policies share a sandbox", plain, k1, ScopeKey(ScopeShared, req))
	}
}
