package audit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRecorderGatewayFields: a recorder writes gateway records into the
// state directory's log with their gateway fields as top-level keys (before
// prev and hash), reads them back unchanged, and the chain verifies.
func TestRecorderGatewayFields(t *testing.T) {
	dir := t.TempDir()
	var warned []error
	rec, err := OpenRecorder(dir, func(err error) { warned = append(warned, err) })
	if err != nil {
		t.Fatal(err)
	}
	want := Record{
		Event: EventDenied, AgentID: "main", SessionKey: "s1", Host: "node", NodeID: "b", Decision: DecisionDeny,
		Reason: "agent \"main\" is bound to node a", DecidedBy: "gateway",
		GatewayFields: GatewayFields{Action: ActionExec, Actor: "agent exechost-cli", ReasonCode: ReasonBinding},
	}
	if err := rec.Record(want); err != nil {
		t.Fatal(err)
	}
	if err := rec.Record(Record{Event: EventDecision, Decision: DecisionAllow,
		GatewayFields: GatewayFields{Action: ActionApprovalsEdit, BaseHash: "ab", Change: "defaults.security full→deny"}}); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	first := strings.SplitN(string(data), "\n", 2)[0]
	if !strings.Contains(first, `"action":"exec","actor":"agent exechost-cli","reasonCode":"binding","prev":""`) {
		t.Errorf("gateway fields are not flattened before prev: %s", first)
	}
	var got []Record
	if err := Read(filepath.Join(dir, "audit.jsonl"), Filter{Text: "approvals.edit"}, func(r Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Change != "defaults.security full→deny" {
		t.Errorf("search by action: %+v", got)
	}
	var all []Record
	_ = Read(filepath.Join(dir, "audit.jsonl"), Filter{}, func(r Record) error { all = append(all, r); return nil })
	want.Time, want.Prev, want.Hash = all[0].Time, all[0].Prev, all[0].Hash
	if diff := cmp.Diff(want, all[0]); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
	if n, err := Verify(filepath.Join(dir, "audit.jsonl")); err != nil || n != 2 {
		t.Errorf("Verify = %d, %v", n, err)
	}
	// After Close, a record fails, is returned and reaches warn.
	if err := rec.Record(want); !errors.Is(err, ErrClosed) || len(warned) != 1 {
		t.Errorf("record after close: %v, warned %v", err, warned)
	}
	var none *Recorder
	if err := none.Record(want); err != nil || none.Log() != nil || none.Close() != nil {
		t.Error("a nil recorder must record nothing without failing")
	}
}
