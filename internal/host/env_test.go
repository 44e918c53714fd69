package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/policy"
)

// TestEngineEnvironmentAllowlist: a variable outside the built-in safe set
// and the policy's envAllowlist is a miss like an unallowlisted executable,
// whether the request or the text sets it; an entry lets it through; the
// environment is on the audit record, a secret's value redacted.
func TestEngineEnvironmentAllowlist(t *testing.T) {
	f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/marker", "$BIN/hello")
	target := filepath.Join(f.dir, "pwned")
	for _, req := range []Request{
		{RawCommand: "ZIPOPT=x marker " + target},
		{RawCommand: "export TAR_OPTIONS=--to-command=x; marker " + target},
		{RawCommand: "env MAKEFLAGS=x marker " + target},
		{RawCommand: "marker " + target, Env: map[string]string{"ZIPOPT": "-TT x"}},
		{Argv: []string{filepath.Join(f.bin, "marker"), target}, Env: map[string]string{"ZIPOPT": "-TT x"}},
	} {
		req.Cwd = f.dir
		_, err := f.engine.Run(context.Background(), req)
		if !errors.Is(err, policy.ErrAllowlistMiss) || !strings.Contains(err.Error(), "environment not allowlisted") {
			t.Errorf("%q env %v: err %v; want an environment miss", req.RawCommand, req.Env, err)
		}
		var de *DenialError
		if errors.As(err, &de) && !strings.HasPrefix(de.Denial.Missing[len(de.Denial.Missing)-1], "env ") {
			t.Errorf("%q: Denial.Missing %q does not name the variable", req.RawCommand, de.Denial.Missing)
		}
		if _, err := os.Stat(target); err == nil {
			t.Fatalf("%q env %v ran", req.RawCommand, req.Env)
		}
	}
	// The built-in safe set needs no entry.
	if _, err := f.engine.Run(context.Background(), Request{RawCommand: "LC_ALL=C hello", Cwd: f.dir}); err != nil {
		t.Fatalf("LC_ALL: %v", err)
	}
	if _, err := f.store.Update(func(file *approvals.File) error {
		file.Defaults.EnvAllowlist = []string{"ZIP*", "API_TOKEN"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	res, err := f.engine.Run(context.Background(), Request{RawCommand: "ZIPOPT=x hello", Cwd: f.dir, Env: map[string]string{"API_TOKEN": "s3cret"}})
	if err != nil || !strings.Contains(res.Stdout, "hello") {
		t.Fatalf("allowed by envAllowlist: %v %+v", err, res)
	}
	f.mu.Lock()
	last := f.audits[len(f.audits)-1]
	f.mu.Unlock()
	if last.Env["ZIPOPT"] != "(set by the command)" || last.Env["API_TOKEN"] != "[redacted]" {
		t.Errorf("audit env = %v; want ZIPOPT shown as set by the command and API_TOKEN redacted", last.Env)
	}
	// No entry lifts a refused name.
	if _, err := f.store.Update(func(file *approvals.File) error {
		file.Defaults.EnvAllowlist = []string{"LD_PRELOAD"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.engine.Run(context.Background(), Request{RawCommand: "hello", Cwd: f.dir, Env: map[string]string{"LD_PRELOAD": "/x.so"}}); err == nil {
		t.Fatal("LD_PRELOAD allowed by an entry")
	}
	f.mu.Lock()
	last = f.audits[len(f.audits)-1]
	f.mu.Unlock()
	if last.Event != "denied" || last.Decision.Reason != "dangerous-env" || last.Env["LD_PRELOAD"] != "/x.so" {
		t.Errorf("dangerous env refusal audit = %+v; want a denied record with the variable", last)
	}
}
