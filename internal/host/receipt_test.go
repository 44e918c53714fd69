package host

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/nodekey"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/receipt"
)

// TestReceiptPerRunAndRefusal: a run that ends and a run refused by
// policy each leave a signed receipt on disk by the time Run returns,
// carrying what the run was decided on and its result as digests; the
// chain verifies with the host's public key alone.
func TestReceiptPerRunAndRefusal(t *testing.T) {
	f := newFixture(t, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/hello")
	key, err := nodekey.Generate()
	if err != nil {
		t.Fatal(err)
	}
	l, err := receipt.Open(receipt.Options{Dir: f.engine.StateDir, Signer: key, Host: "gw"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var warned []error
	f.engine.OnAudit = both(f.engine.OnAudit, f.engine.receiptHook(l, func(err error) { warned = append(warned, err) }))

	res, err := f.engine.Run(context.Background(), Request{RawCommand: "hello world", Cwd: f.dir, AgentID: "dev", RunID: "r1"})
	if err != nil || res.Stdout != "hello world\n" {
		t.Fatalf("run: %+v, %v", res.Result, err)
	}
	if _, err := f.engine.Run(context.Background(), Request{RawCommand: "other", Cwd: f.dir, AgentID: "dev", RunID: "r2"}); err == nil {
		t.Fatal("other ran without a rule")
	}
	data, err := os.ReadFile(receipt.Path(f.engine.StateDir))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 || len(warned) != 0 {
		t.Fatalf("%d receipts (warnings %v), want 2:\n%s", len(lines), warned, data)
	}
	ran, err := receipt.Parse([]byte(lines[0]))
	if err != nil {
		t.Fatal(err)
	}
	if ran.RunID != "r1" || ran.Event != "finished" || ran.AgentID != "dev" || ran.ExitCode == nil || *ran.ExitCode != 0 {
		t.Errorf("finished receipt: %+v", ran)
	}
	if ran.CommandSHA256 != receipt.SHA256([]byte("hello world")) || ran.Output.StdoutSHA256 != receipt.SHA256([]byte("hello world\n")) || ran.Output.StdoutBytes != 12 {
		t.Errorf("digests: command %s output %+v", ran.CommandSHA256, ran.Output)
	}
	if ran.Approval.By != "rule" || len(ran.Approval.Rule) != 1 || !strings.HasSuffix(ran.Approval.Rule[0], "/hello") {
		t.Errorf("approval: %+v", ran.Approval)
	}
	hello := filepath.Join(f.bin, "hello")
	script, _ := os.ReadFile(hello)
	if ran.Executables[hello] != receipt.SHA256(script) {
		t.Errorf("executables %v, want %s's sha256", ran.Executables, hello)
	}
	policyFile, _ := os.ReadFile(f.store.Path)
	if ran.PlanSHA256 == "" || ran.PolicySHA256 != receipt.SHA256(policyFile) || ran.Jail == nil || ran.Jail.RulesSHA256 == "" {
		t.Errorf("plan %q policy %q jail %+v", ran.PlanSHA256, ran.PolicySHA256, ran.Jail)
	}
	refused, err := receipt.Parse([]byte(lines[1]))
	if err != nil {
		t.Fatal(err)
	}
	if refused.Event != "denied" || refused.ExitCode != nil || refused.Approval.By != "policy" || refused.Approval.Decision != string(policy.DenyRun) {
		t.Errorf("refusal receipt: %+v approval %+v", refused, refused.Approval)
	}
	var b bytes.Buffer
	if err := receipt.Export(&b, f.engine.StateDir, receipt.Filter{}, time.Now()); err != nil {
		t.Fatal(err)
	}
	rep, err := receipt.Verify(&b, receipt.Trust{Keys: []string{key.PublicKeyString()}})
	if err != nil || !rep.OK() || rep.Chains[0].Receipts != 2 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}
