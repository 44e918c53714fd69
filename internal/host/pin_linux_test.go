package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/prompt"
	"github.com/exechost/exechost/internal/runner"
)

// swapPrompter replaces a file while the human is asked, then allows:
// the moment between the decision and the start.
type swapPrompter struct {
	t      *testing.T
	path   string
	body   string
	asked  prompt.Request
	noSwap bool
}

func (s *swapPrompter) Prompt(ctx context.Context, req prompt.Request) (policy.Approval, string, error) {
	s.asked = req
	if !s.noSwap {
		tmp := s.path + ".new"
		if err := os.WriteFile(tmp, []byte(s.body), 0o755); err != nil {
			s.t.Fatal(err)
		}
		if err := os.Rename(tmp, s.path); err != nil {
			s.t.Fatal(err)
		}
	}
	return policy.AllowOnce, "test", nil
}

// TestFileDecidedOnIsFileThatRuns: an executable replaced at its path
// after the decision does not start, directly or in the interpreter; the
// prompt and the audit name the sha256 of the file decided on.
func TestFileDecidedOnIsFileThatRuns(t *testing.T) {
	for _, text := range []string{"other x", "other x | hello"} {
		f := newFixture(t, policy.SecurityAllowlist, policy.AskAlways, policy.FallbackDeny, "$BIN/other", "$BIN/hello")
		marker := filepath.Join(f.dir, "swapped-ran")
		sp := &swapPrompter{t: t, path: filepath.Join(f.bin, "other"), body: "#!/bin/sh\n: > " + marker + "\n"}
		f.engine.Prompter = sp
		res, err := f.engine.Run(context.Background(), Request{RawCommand: text, Cwd: f.dir})
		if err == nil && res.ExitCode == 0 {
			t.Errorf("%q: the swapped file's run succeeded: %+v", text, res)
		}
		if !errors.Is(err, runner.ErrExecutableChanged) && res.ExitCode != 126 {
			t.Errorf("%q: err %v exit %d; want the start refused (126)", text, err, res.ExitCode)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%q: the file swapped in after the decision ran", text)
		}
		if sum := sp.asked.ExecutableSHA256[filepath.Join(f.bin, "other")]; len(sum) != 64 {
			t.Errorf("%q: prompt sha256 = %q", text, sum)
		}
	}
	// The control: unswapped, the same path runs, and the audit names it.
	f := newFixture(t, policy.SecurityAllowlist, policy.AskAlways, policy.FallbackDeny, "$BIN/other")
	f.engine.Prompter = &swapPrompter{t: t, noSwap: true}
	res, err := f.engine.Run(context.Background(), Request{RawCommand: "other x", Cwd: f.dir})
	if err != nil || res.Stdout != "other x\n" {
		t.Fatalf("control: %v %+v", err, res)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if sum := f.audits[0].ResolvedSHA256[filepath.Join(f.bin, "other")]; len(sum) != 64 {
		t.Errorf("audit sha256 = %q", sum)
	}
}

// answerPrompter answers every prompt with one answer and keeps the last
// request.
type answerPrompter struct {
	answer policy.Approval
	asked  prompt.Request
}

func (a *answerPrompter) Prompt(ctx context.Context, req prompt.Request) (policy.Approval, string, error) {
	a.asked = req
	return a.answer, "test", nil
}

// TestAllowAlwaysRecordsDigest: allow-always records the sha256 of the
// file it was given for; once the file at that path differs, prompts and
// audit records say it changed.
func TestAllowAlwaysRecordsDigest(t *testing.T) {
	f := newFixture(t, policy.SecurityAllowlist, policy.AskOnMiss, policy.FallbackDeny)
	ap := &answerPrompter{answer: policy.AllowAlways}
	f.engine.Prompter = ap
	other := filepath.Join(f.bin, "other")
	if _, err := f.engine.Run(context.Background(), Request{RawCommand: "other a", Cwd: f.dir}); err != nil {
		t.Fatal(err)
	}
	file, err := f.store.Load()
	if err != nil {
		t.Fatal(err)
	}
	if e := file.Agents["*"].Allowlist; len(e) != 1 || e[0].Pattern != other || len(e[0].SHA256) != 64 {
		t.Fatalf("allow-always recorded %+v; want %s with its sha256", e, other)
	}
	if err := os.WriteFile(other, []byte("#!/bin/sh\necho changed\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := f.engine.Prepare(Request{RawCommand: "other b", Cwd: f.dir})
	if err != nil || len(p.Changed) != 1 || p.Changed[0] != other {
		t.Fatalf("Prepare after a change: %v Changed=%q", err, p.Changed)
	}
	res, err := f.engine.Run(context.Background(), Request{RawCommand: "other b", Cwd: f.dir})
	if err != nil || res.Stdout != "changed\n" {
		t.Fatalf("the entry still matches by path: %v %+v", err, res)
	}
	f.mu.Lock()
	last := f.audits[len(f.audits)-2] // the decision record
	f.mu.Unlock()
	if len(last.Changed) != 1 || last.Changed[0] != other {
		t.Errorf("audit decision record Changed = %q", last.Changed)
	}
}
