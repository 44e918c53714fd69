package asksock_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/approverui"
	"github.com/exechost/exechost/internal/asksock"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/testproc"
)

// These tests drive a real host.Engine that prompts through a real
// approval socket: what the engine sends, what the broker offers, what an
// answer (or its absence) does, and askFallback for every way the approver
// can fail. asksock ranks below host and imports neither way: its
// prompters satisfy host.Prompter structurally, pinned here.

var (
	_ host.Prompter = (*asksock.SocketPrompter)(nil)
	_ host.Prompter = asksock.BrokerPrompter{}
)

// engineFixture is a state directory with an approvals file, a bin
// directory of tiny scripts used as the engine's PATH, and an engine over
// both that records its audit records.
type engineFixture struct {
	t      *testing.T
	dir    string // state directory
	work   string // the runs' cwd and home
	bin    string
	store  *approvals.Store
	engine *host.Engine
	mu     sync.Mutex
	audits []host.AuditRecord
}

func newEngineFixture(t *testing.T, sec policy.Security, ask policy.Ask, fb policy.Fallback, allow ...string) *engineFixture {
	t.Helper()
	// The state directory and the runs' working tree are apart: no run may
	// reach the state directory, its cwd included.
	dir, work := t.TempDir(), t.TempDir()
	bin := filepath.Join(work, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"hello", "other"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\necho "+name+" \"$@\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f := &engineFixture{t: t, dir: dir, work: work, bin: bin, store: approvals.NewStore(dir)}
	_, err := f.store.Update(func(file *approvals.File) error {
		file.Defaults.Security, file.Defaults.Ask, file.Defaults.AskFallback = string(sec), string(ask), string(fb)
		for _, p := range allow {
			file.AddPattern("*", strings.ReplaceAll(p, "$BIN", bin))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e := host.NewEngine(dir, policy.HostGateway, "gw")
	e.PATH = bin + ":/usr/bin:/bin"
	e.Home = work
	e.OnAudit = func(r host.AuditRecord) { f.mu.Lock(); f.audits = append(f.audits, r); f.mu.Unlock() }
	// Close flushes the queued lastUsedAt stamps before the temporary
	// directory is removed (cleanups run last-registered first), so no
	// rewrite of the file races its removal.
	t.Cleanup(func() { _ = e.Close() })
	f.engine = e
	return f
}

// withApprover starts a real approval socket whose broker answers with fn.
// fn gets a subscription taken before anything can prompt, so no prompt can
// arrive unseen.
func (f *engineFixture) withApprover(fn func(ch <-chan prompt.Change, b *prompt.Broker, ctx context.Context)) *prompt.Broker {
	f.t.Helper()
	file, err := f.store.Ensure()
	if err != nil {
		f.t.Fatal(err)
	}
	sock := filepath.Join(f.dir, "a.sock")
	b := prompt.NewBroker()
	srv := &asksock.Server{Path: sock, Token: []byte(file.Socket.Token), Broker: b}
	if err := srv.Listen(); err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go srv.Serve(ctx)
	if fn != nil {
		ch, unsubscribe := b.Subscribe()
		go func() { defer unsubscribe(); fn(ch, b, ctx) }()
	}
	f.t.Cleanup(func() { cancel(); srv.Close() })
	f.engine.Prompter = &asksock.Client{SocketPath: sock, Token: []byte(file.Socket.Token)}
	return b
}

func TestEnginePromptAnswers(t *testing.T) {
	tests := []struct {
		name       string
		ask        policy.Ask
		answer     policy.Approval
		cmd        string
		wantErr    error
		wantRecord []string // patterns in agent "dev" afterwards
	}{
		{"allow-once runs, records nothing", policy.AskOnMiss, policy.AllowOnce, "other", nil, nil},
		{"allow-always records the exact paths", policy.AskOnMiss, policy.AllowAlways, "other x | hello", nil, []string{"$BIN/other", "$BIN/hello"}},
		{"allow-always never records a shell or wrapper", policy.AskOnMiss, policy.AllowAlways, "env sh -c 'other'", nil, []string{"$BIN/other"}},
		{"deny", policy.AskOnMiss, policy.Reject, "other", policy.ErrUserDenied, nil},
		{"allow-always not offered with ask=always", policy.AskAlways, policy.AllowAlways, "other", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newEngineFixture(t, policy.SecurityAllowlist, tt.ask, policy.FallbackDeny)
			var seen []prompt.Request
			var mu sync.Mutex
			f.withApprover(func(ch <-chan prompt.Change, b *prompt.Broker, ctx context.Context) {
				for {
					select {
					case <-ctx.Done():
						return
					case c := <-ch:
						if c.Kind != prompt.ChangeAdded {
							continue
						}
						mu.Lock()
						seen = append(seen, c.Pending.Request)
						mu.Unlock()
						a := tt.answer
						if !prompt.Offered(c.Pending.Request, a) {
							a = policy.AllowOnce
						}
						_ = b.Resolve(c.Pending.ID, a, "test")
					}
				}
			})
			_, err := f.engine.Run(context.Background(), host.Request{RawCommand: tt.cmd, Cwd: f.work, AgentID: "dev", SessionKey: "s1"})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			if len(seen) != 1 || seen[0].AgentID != "dev" || seen[0].SessionKey != "s1" || seen[0].Command != tt.cmd {
				t.Errorf("prompt = %+v", seen)
			}
			if tt.ask == policy.AskAlways && len(seen) == 1 && prompt.Offered(seen[0], policy.AllowAlways) {
				t.Error("allow-always offered with ask=always")
			}
			mu.Unlock()
			file, err := f.store.Load()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			if a := file.Agents["dev"]; a != nil {
				for _, e := range a.Allowlist {
					got = append(got, e.Pattern)
				}
			}
			var want []string
			for _, p := range tt.wantRecord {
				want = append(want, strings.ReplaceAll(p, "$BIN", f.bin))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("recorded patterns (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEngineAllowAlwaysThenNoPrompt(t *testing.T) {
	f := newEngineFixture(t, policy.SecurityAllowlist, policy.AskOnMiss, policy.FallbackDeny)
	prompts := 0
	var mu sync.Mutex
	f.withApprover(func(ch <-chan prompt.Change, b *prompt.Broker, ctx context.Context) {
		for {
			select {
			case <-ctx.Done():
				return
			case c := <-ch:
				if c.Kind == prompt.ChangeAdded {
					mu.Lock()
					prompts++
					mu.Unlock()
					_ = b.Resolve(c.Pending.ID, policy.AllowAlways, "test")
				}
			}
		}
	})
	for i := 0; i < 3; i++ {
		if _, err := f.engine.Run(context.Background(), host.Request{RawCommand: "hello", Cwd: f.work, AgentID: "dev"}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if prompts != 1 {
		t.Errorf("prompts = %d, want 1 (allow-always must cover later runs)", prompts)
	}
}

// TestEngineFallbackMatrix covers approver absent, crashed mid-prompt and
// timing out, for every askFallback.
func TestEngineFallbackMatrix(t *testing.T) {
	type approverMode int
	const (
		absent approverMode = iota
		crashes
		silent
	)
	for _, mode := range []approverMode{absent, crashes, silent} {
		for _, fb := range policy.Fallbacks() {
			name := []string{"absent", "crashes", "silent"}[mode] + "/" + string(fb)
			t.Run(name, func(t *testing.T) {
				f := newEngineFixture(t, policy.SecurityAllowlist, policy.AskOnMiss, fb, "$BIN/hello")
				// Only the silent approver may reach the prompt timeout: a
				// timeout that could also end the other two would let a
				// broken crash or absence path pass as a timeout (which
				// then fails the reason check after two minutes).
				f.engine.PromptTimeout = 2 * time.Minute
				why := []string{"approver unreachable", "approver reply unverifiable", "timed out"}[mode]
				switch mode {
				case absent:
					file, _ := f.store.Ensure()
					f.engine.Prompter = &asksock.Client{SocketPath: filepath.Join(f.dir, "nobody-home.sock"), Token: []byte(file.Socket.Token)}
				case crashes:
					file, _ := f.store.Ensure()
					sock := filepath.Join(f.dir, "c.sock")
					b := prompt.NewBroker()
					srv := &asksock.Server{Path: sock, Token: []byte(file.Socket.Token), Broker: b}
					if err := srv.Listen(); err != nil {
						t.Fatal(err)
					}
					go srv.Serve(context.Background())
					ch, unsubscribe := b.Subscribe()
					go func() {
						defer unsubscribe()
						select {
						case <-ch:
						case <-time.After(testproc.RecvLimit):
							// No prompt came: the test's own checks fail.
						}
						srv.Close() // the approver dies with the prompt open
					}()
					f.engine.Prompter = &asksock.Client{SocketPath: sock, Token: []byte(file.Socket.Token)}
				case silent:
					f.engine.PromptTimeout = 300 * time.Millisecond
					f.withApprover(nil)
				}
				// "other" misses the allowlist; "hello" would match it.
				_, err := f.engine.Run(context.Background(), host.Request{RawCommand: "other", Cwd: f.work})
				switch fb {
				case policy.FallbackFull:
					if err != nil {
						t.Fatalf("fallback full: %v", err)
					}
				case policy.FallbackAllowlist:
					if !errors.Is(err, policy.ErrAllowlistMiss) {
						t.Fatalf("fallback allowlist: %v", err)
					}
				default:
					if !errors.Is(err, policy.ErrApprovalRequired) {
						t.Fatalf("fallback deny: %v", err)
					}
				}
				f.mu.Lock()
				defer f.mu.Unlock()
				var fellBack bool
				for _, a := range f.audits {
					fellBack = fellBack || a.Fallback
				}
				if !fellBack {
					t.Error("audit records must mark the fallback")
				}
				if err != nil && (!strings.Contains(err.Error(), "askFallback") || !strings.Contains(err.Error(), why)) {
					t.Errorf("reason must say askFallback applied because of %q: %v", why, err)
				}
			})
		}
	}
}

// TestSocketPrompterFollowsTokenRotation checks that a running engine keeps
// reaching the approver after exec-approvals.json gets a new token.
func TestSocketPrompterFollowsTokenRotation(t *testing.T) {
	f := newEngineFixture(t, policy.SecurityAllowlist, policy.AskOnMiss, policy.FallbackDeny)
	f.engine.Prompter = &asksock.SocketPrompter{Store: f.store, Timeout: 5 * time.Second}
	start := func() (stop func()) {
		file, err := f.store.Ensure()
		if err != nil {
			t.Fatal(err)
		}
		b := prompt.NewBroker()
		srv := &asksock.Server{Path: f.store.SocketPath(file), Token: []byte(file.Socket.Token), Broker: b}
		if err := srv.Listen(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go srv.Serve(ctx)
		go approverui.AutoDecide(ctx, b, policy.AllowOnce, "auto")
		return func() { cancel(); srv.Close() }
	}
	stop := start()
	if _, err := f.engine.Run(context.Background(), host.Request{RawCommand: "other", Cwd: f.work}); err != nil {
		t.Fatalf("first prompt: %v", err)
	}
	stop()
	if _, err := f.store.Update(func(file *approvals.File) error { file.Socket.Token = approvals.NewToken(); return nil }); err != nil {
		t.Fatal(err)
	}
	stop = start()
	defer stop()
	if _, err := f.engine.Run(context.Background(), host.Request{RawCommand: "other", Cwd: f.work}); err != nil {
		t.Fatalf("prompt after token rotation: %v", err)
	}
}
