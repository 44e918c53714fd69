package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/nodekey"
	"github.com/exechost/exechost/internal/receipt"
	"github.com/exechost/exechost/internal/state"
)

// TestVerifyProcess is the fresh process of TestExportVerifyOffline: when
// EXECHOST_TEST_VERIFY_ARGS is set it runs exechost with those arguments
// and exits with its status.
func TestVerifyProcess(t *testing.T) {
	args := os.Getenv("EXECHOST_TEST_VERIFY_ARGS")
	if args == "" {
		t.Skip("helper process only")
	}
	os.Exit(run(strings.Split(args, "\x1f"), os.Stdout, os.Stderr))
}

// verifyInFreshProcess runs `exechost audit verify bundle --key key` in a
// new process whose HOME and state directory are empty: it has the
// bundle and the public key, nothing else.
func verifyInFreshProcess(t *testing.T, bundle, key string) (string, int) {
	t.Helper()
	empty := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestVerifyProcess$")
	cmd.Env = []string{"HOME=" + empty, state.EnvDir + "=" + filepath.Join(empty, "none"), "PATH=/usr/bin:/bin",
		"EXECHOST_TEST_VERIFY_ARGS=" + strings.Join([]string{"audit", "verify", bundle, "--key", key}, "\x1f")}
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(empty, "none")); err == nil {
		t.Error("verify created a state directory")
	}
	return string(out), code
}

// TestExportVerifyOffline: `audit export` on the host, `audit verify
// --key` in a process that has only the bundle and the public key; an
// edited receipt in the same bundle fails there, naming the receipt.
func TestExportVerifyOffline(t *testing.T) {
	dir := t.TempDir()
	key, _, err := nodekey.LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := receipt.Open(receipt.Options{Dir: dir, Signer: key, Host: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{"r1", "r2", "r3"} {
		code := 0
		if _, err := l.Append(receipt.Receipt{Kind: receipt.KindRun, Event: "finished", RunID: run, AgentID: "main", ExitCode: &code,
			CommandSHA256: receipt.SHA256([]byte("echo " + run))}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--state-dir", dir, "audit", "export"}, &stdout, &stderr); code != 0 {
		t.Fatalf("export: exit %d: %s", code, stderr.String())
	}
	bundle := filepath.Join(t.TempDir(), "bundle.jsonl")
	if err := os.WriteFile(bundle, stdout.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := verifyInFreshProcess(t, bundle, key.PublicKeyString())
	if code != 0 || !strings.Contains(out, "ok: every receipt") || !strings.Contains(out, "3 receipts") {
		t.Fatalf("verify of an intact bundle: exit %d:\n%s", code, out)
	}
	altered := strings.Replace(stdout.String(), `"runId":"r2","event":"finished","agentId":"main"`, `"runId":"r2","event":"finished","agentId":"ops"`, 1)
	if altered == stdout.String() {
		t.Fatal("the edit did not apply")
	}
	if err := os.WriteFile(bundle, []byte(altered), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = verifyInFreshProcess(t, bundle, key.PublicKeyString())
	if code != 1 || !strings.Contains(out, "receipt n1#2 (run r2): forged or altered") {
		t.Fatalf("verify of an edited bundle: exit %d:\n%s", code, out)
	}
	// Without a key nothing is trusted, and the command says what to give.
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"audit", "verify", bundle}, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "--key") {
		t.Fatalf("verify without a key: exit %d: %s", code, stderr.String())
	}
}
