package receipt_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/nodekey"
	"github.com/exechost/exechost/internal/receipt"
)

// clock is an injected clock that moves a second per call.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { c.t = c.t.Add(time.Second); return c.t }

func newKey(t testing.TB) *nodekey.Key {
	t.Helper()
	k, err := nodekey.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func openLog(t testing.TB, dir string, k *nodekey.Key, host string, max int64) *receipt.Log {
	t.Helper()
	c := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	l, err := receipt.Open(receipt.Options{Dir: dir, Signer: k, Host: host, MaxBytes: max, Keep: 1, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func runReceipt(run, agent, cmd string, code int) receipt.Receipt {
	return receipt.Receipt{Kind: receipt.KindRun, Event: "finished", RunID: run, AgentID: agent,
		Approval:      &receipt.Approval{Decision: "allow", By: "rule", Rule: []string{"/usr/bin/echo"}},
		CommandSHA256: receipt.SHA256([]byte(cmd)), ExitCode: &code,
		Output: &receipt.Output{StdoutSHA256: receipt.SHA256([]byte("hi\n")), StdoutBytes: 3, StderrSHA256: receipt.SHA256(nil)}}
}

// bundle writes n receipts to a fresh log and exports them.
func bundle(t *testing.T, k *nodekey.Key, host string, n int) []string {
	t.Helper()
	dir := t.TempDir()
	l := openLog(t, dir, k, host, 0)
	for i := range n {
		if _, err := l.Append(runReceipt("run-"+string(rune('a'+i)), "main", "echo hi", 0)); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if err := receipt.Export(&b, dir, receipt.Filter{}, time.Now()); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

func verify(t *testing.T, lines []string, trust receipt.Trust) *receipt.Report {
	t.Helper()
	rep, err := receipt.Verify(strings.NewReader(strings.Join(lines, "\n")+"\n"), trust)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// wantFinding fails unless rep has a finding naming want (a receipt name)
// whose problem contains problem.
func wantFinding(t *testing.T, rep *receipt.Report, want, problem string) {
	t.Helper()
	for _, f := range rep.Findings {
		if strings.Contains(f.Receipt, want) && strings.Contains(f.Problem, problem) {
			return
		}
	}
	t.Errorf("no finding naming %q with %q; findings: %v", want, problem, rep.Findings)
}

func TestChainVerifies(t *testing.T) {
	k := newKey(t)
	lines := bundle(t, k, "node-1", 4)
	rep := verify(t, lines, receipt.Trust{Keys: []string{k.PublicKeyString()}})
	if !rep.OK() || len(rep.Chains) != 1 || rep.Chains[0].Receipts != 4 || rep.Chains[0].LastSeq != 4 {
		t.Fatalf("clean chain: %+v", rep)
	}
	// Control: without the key nothing is trusted.
	rep = verify(t, lines, receipt.Trust{Keys: []string{newKey(t).PublicKeyString()}})
	if rep.OK() {
		t.Fatal("a chain verified with another host's key")
	}
}

func TestTamperingIsNamed(t *testing.T) {
	k := newKey(t)
	trust := receipt.Trust{Keys: []string{k.PublicKeyString()}}
	// lines[0] is the header; receipts are lines[1..4], seq 1..4.
	base := bundle(t, k, "node-1", 4)

	t.Run("edit a field", func(t *testing.T) {
		l := slicesClone(base)
		l[2] = strings.Replace(l[2], `"exitCode":0`, `"exitCode":1`, 1)
		if l[2] == base[2] {
			t.Fatal("edit did not apply")
		}
		wantFinding(t, verify(t, l, trust), "node-1#2", "forged or altered")
	})
	t.Run("re-sign with another key", func(t *testing.T) {
		l := slicesClone(base)
		r, err := receipt.Parse([]byte(l[2]))
		if err != nil {
			t.Fatal(err)
		}
		one := 1
		r.ExitCode = &one
		ln, err := receipt.Sign(&r, newKey(t))
		if err != nil {
			t.Fatal(err)
		}
		l[2] = string(ln)
		wantFinding(t, verify(t, l, trust), "node-1#2", "not trusted")
	})
	t.Run("non-canonical", func(t *testing.T) {
		l := slicesClone(base)
		l[2] = strings.Replace(l[2], `{"v":1,`, `{"v":1,"kind":"run",`, 1)
		rep := verify(t, l, trust)
		if rep.OK() || rep.Findings[0].Line != 3 {
			t.Fatalf("a duplicate member passed: %+v", rep.Findings)
		}
	})
	t.Run("drop", func(t *testing.T) {
		l := append(slicesClone(base[:2]), base[3:]...)
		wantFinding(t, verify(t, l, trust), "node-1#3", "gap: receipts 2-2")
	})
	t.Run("drop the first", func(t *testing.T) {
		l := append(slicesClone(base[:1]), base[2:]...)
		wantFinding(t, verify(t, l, trust), "node-1#2", "gap: receipts 1-1")
	})
	t.Run("reorder", func(t *testing.T) {
		l := slicesClone(base)
		l[2], l[3] = l[3], l[2]
		rep := verify(t, l, trust)
		wantFinding(t, rep, "node-1#3", "gap")
		wantFinding(t, rep, "node-1#2", "out of order")
	})
	t.Run("replay within the chain", func(t *testing.T) {
		l := append(slicesClone(base), base[2])
		wantFinding(t, verify(t, l, trust), "node-1#2", "out of order or replayed")
	})
	t.Run("replay from another host", func(t *testing.T) {
		other := newKey(t)
		ob := bundle(t, other, "node-1", 4) // same name, another key
		l := slicesClone(base)
		l = append(l[:3], append([]string{ob[2]}, l[3:]...)...)
		wantFinding(t, verify(t, l, trust), "node-1#2", "replayed from another host")
	})
	t.Run("replay from another host, relabelled", func(t *testing.T) {
		other := newKey(t)
		ob := bundle(t, other, "node-1", 4)
		l := slicesClone(base)
		l[2] = strings.Replace(ob[2], other.PublicKeyString(), k.PublicKeyString(), 1)
		wantFinding(t, verify(t, l, trust), "node-1#2", "forged or altered")
	})
	t.Run("control: untouched", func(t *testing.T) {
		if rep := verify(t, base, trust); !rep.OK() {
			t.Fatalf("the untouched bundle failed: %v", rep.Findings)
		}
	})
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// TestRotationRecordsWhatItRemoved: a rotation that removes a file leaves
// a signed record, so the verifier accepts the chain starting later; the
// same cut without the record is a gap.
func TestRotationRecordsWhatItRemoved(t *testing.T) {
	k := newKey(t)
	dir := t.TempDir()
	l := openLog(t, dir, k, "gateway", 1200) // a few receipts per file, Keep 1
	for i := range 12 {
		if _, err := l.Append(runReceipt("r"+string(rune('a'+i)), "main", "echo", 0)); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if err := receipt.Export(&b, dir, receipt.Filter{}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"kind":"rotated"`) {
		t.Fatalf("no rotation record after 12 receipts in 1200-byte files:\n%s", b.String())
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	trust := receipt.Trust{Keys: []string{k.PublicKeyString()}}
	rep := verify(t, lines, trust)
	if !rep.OK() || len(rep.Notes) == 0 || !strings.Contains(strings.Join(rep.Notes, "\n"), "removed by rotation") {
		t.Fatalf("rotated chain: findings %v notes %v", rep.Findings, rep.Notes)
	}
	// Control: the same bundle without its rotation records is a gap.
	var cut []string
	for _, ln := range lines {
		if !strings.Contains(ln, `"kind":"rotated"`) {
			cut = append(cut, ln)
		}
	}
	rep = verify(t, cut, trust)
	if rep.OK() || !strings.Contains(rep.Findings[0].Problem, "no rotation record") {
		t.Fatalf("removal without a record was not a gap: %v", rep.Findings)
	}
}

// TestChainContinuesAcrossOpens: a second process (a second Log on the
// same directory) continues the chain; a torn last line is cut.
func TestChainContinuesAcrossOpens(t *testing.T) {
	k := newKey(t)
	dir := t.TempDir()
	a := openLog(t, dir, k, "gateway", 0)
	b := openLog(t, dir, k, "gateway", 0)
	for i := range 6 {
		l := a
		if i%2 == 1 {
			l = b
		}
		if _, err := l.Append(runReceipt("r"+string(rune('a'+i)), "main", "echo", 0)); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.OpenFile(receipt.Path(dir), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"v":1,"kind":"ru`) // a crash mid-write
	f.Close()
	c := openLog(t, dir, k, "gateway", 0)
	if _, err := c.Append(runReceipt("rz", "main", "echo", 0)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := receipt.Export(&buf, dir, receipt.Filter{}, time.Now()); err != nil {
		t.Fatal(err)
	}
	rep := verify(t, strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n"), receipt.Trust{Keys: []string{k.PublicKeyString()}})
	if !rep.OK() || rep.Chains[0].Receipts != 7 {
		t.Fatalf("two writers and a torn line: %+v", rep)
	}
	data, _ := os.ReadFile(filepath.Join(dir, receipt.FileName))
	if strings.Contains(string(data), `"kind":"ru`+"\n") {
		t.Fatal("the torn line was kept")
	}
}

// TestExportFilterElides: a filtered export keeps the chain verifiable
// and says what it left out.
func TestExportFilterElides(t *testing.T) {
	k := newKey(t)
	dir := t.TempDir()
	l := openLog(t, dir, k, "gateway", 0)
	for i, agent := range []string{"main", "ops", "ops", "main", "ops"} {
		if _, err := l.Append(runReceipt("r"+string(rune('a'+i)), agent, "echo", 0)); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if err := receipt.Export(&b, dir, receipt.Filter{Agent: "main"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), `"agentId":"ops"`) {
		t.Fatal("the filter exported another agent's receipt")
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	rep := verify(t, lines, receipt.Trust{Keys: []string{k.PublicKeyString()}})
	if !rep.OK() || len(rep.Notes) != 2 {
		t.Fatalf("filtered export: findings %v notes %v", rep.Findings, rep.Notes)
	}
	// A forged elision that hides a receipt is caught by the next
	// receipt's prev.
	var forged []string
	for _, ln := range lines {
		if strings.Contains(ln, `"kind":"elided"`) && strings.Contains(ln, `"fromSeq":2`) {
			ln = strings.Replace(ln, `"lastDigest":"`, `"lastDigest":"00`, 1)
		}
		forged = append(forged, ln)
	}
	wantFinding(t, verify(t, forged, receipt.Trust{Keys: []string{k.PublicKeyString()}}), "gateway#4", "chain broken")
}

// TestWriteGroupsItsSyncs: receipts written with Write by many goroutines
// (with Appends among them, and rotations under way) are in the file as
// soon as Write returns, every one's sync outcome arrives exactly once
// (by Close at the latest), and the chain verifies.
func TestWriteGroupsItsSyncs(t *testing.T) {
	k := newKey(t)
	dir := t.TempDir()
	l, err := receipt.Open(receipt.Options{Dir: dir, Signer: k, Host: "gateway", MaxBytes: 6000, Keep: 50})
	if err != nil {
		t.Fatal(err)
	}
	// Readable as soon as Write returns, before any sync is waited for.
	if _, err := l.Write(runReceipt("first", "main", "echo", 0), nil); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(receipt.Path(dir)); !strings.Contains(string(data), `"runId":"first"`) {
		t.Fatal("a receipt is not in the file once Write returned")
	}
	const writers, each = 8, 12
	var mu sync.Mutex
	outcomes := map[string]int{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				if i%4 == 3 {
					if _, err := l.Append(runReceipt(id, "main", "echo", 0)); err != nil {
						t.Error(err)
					}
					continue
				}
				_, err := l.Write(runReceipt(id, "main", "echo", 0), func(err error) {
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						t.Errorf("sync of %s: %v", id, err)
					}
					outcomes[id]++
				})
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if want := writers * (each - each/4); len(outcomes) != want {
		t.Errorf("%d receipts heard their sync, want %d", len(outcomes), want)
	}
	for id, n := range outcomes {
		if n != 1 {
			t.Errorf("%s heard its sync %d times", id, n)
		}
	}
	var buf bytes.Buffer
	if err := receipt.Export(&buf, dir, receipt.Filter{}, time.Now()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	rep := verify(t, lines, receipt.Trust{Keys: []string{k.PublicKeyString()}})
	if !rep.OK() || rep.Chains[0].Receipts < writers*each {
		t.Fatalf("chain after concurrent writes: %d receipts, findings %v", rep.Chains[0].Receipts, rep.Findings)
	}
	if _, err := os.Stat(receipt.Path(dir) + ".1"); err != nil {
		t.Errorf("no rotation happened while syncs were waiting: %v", err)
	}
}

// TestSystemCrashTailCut: after a system crash, what was written but
// never synced can read back as NUL bytes with later text after them;
// the next open cuts the file at the line holding the first NUL and
// continues the chain from the line before it.
func TestSystemCrashTailCut(t *testing.T) {
	k := newKey(t)
	dir := t.TempDir()
	l := openLog(t, dir, k, "gateway", 0)
	for i := range 3 {
		if _, err := l.Append(runReceipt(fmt.Sprint("r", i), "main", "echo", 0)); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	f, err := os.OpenFile(receipt.Path(dir), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"v":1,"kind":"run",` + strings.Repeat("\x00", 300) + `"sig":"x"}` + "\n")
	f.Close()
	c := openLog(t, dir, k, "gateway", 0)
	if _, err := c.Append(runReceipt("after", "main", "echo", 0)); err != nil {
		t.Fatalf("the chain does not continue past a crash's NULs: %v", err)
	}
	var buf bytes.Buffer
	if err := receipt.Export(&buf, dir, receipt.Filter{}, time.Now()); err != nil {
		t.Fatal(err)
	}
	rep := verify(t, strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n"), receipt.Trust{Keys: []string{k.PublicKeyString()}})
	if !rep.OK() || rep.Chains[0].Receipts != 4 {
		t.Fatalf("after the cut: %+v", rep)
	}
	if data, _ := os.ReadFile(receipt.Path(dir)); bytes.IndexByte(data, 0) >= 0 {
		t.Fatal("the NUL bytes were kept")
	}
}
