package approvals

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestFileAsWirePayload(t *testing.T) {
	f, err := Parse("f", []byte(everyLevel))
	if err != nil {
		t.Fatal(err)
	}
	type payload struct {
		Hash string `json:"hash"`
		File *File  `json:"file"`
	}
	data, err := json.Marshal(payload{Hash: f.Hash(), File: f.Redacted()})
	if err != nil {
		t.Fatal(err)
	}
	var got payload
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(f.Redacted(), got.File, cmpopts.IgnoreUnexported(File{}), cmpopts.EquateEmpty()); d != "" {
		t.Errorf("file changed on the wire (-want +got):\n%s", d)
	}
	if got.Hash != got.File.Hash() {
		t.Error("hash of the received file differs")
	}

	err = json.Unmarshal([]byte(`{"file": {"version": 1, "agents": {"a": {"allowlist": "x"}}}}`), &got)
	var pe *ParseError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "agents.a.allowlist") {
		t.Errorf("bad file on the wire: %v", err)
	}
}

func TestResolvedJSON(t *testing.T) {
	f := Default()
	f.AddPattern("*", "/usr/bin/rg")
	f.Agents["*"].Allowlist[0].ID = "e1"
	data, err := json.Marshal(f.ResolvePolicy("dev"))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"local":{"security":"deny","ask":"on-miss","askFallback":"deny"},` +
		`"sources":{"ask":"defaults","askFallback":"defaults","security":"defaults"},` +
		`"allowlist":[{"agent":"*","entry":{"id":"e1","pattern":"/usr/bin/rg"}}]}`
	if string(data) != want {
		t.Errorf("got  %s\nwant %s", data, want)
	}
}

func TestReplaceKeepsSocket(t *testing.T) {
	cur := Default()
	cur.Socket = Socket{Path: "/s/sock", Token: "secret"}
	next, err := Parse("f", []byte(`{"version": 1, "defaults": {"security": "allowlist"}, "agents": {"*": {"allowlist": [{"pattern": "/x/y"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	cur.Replace(next)
	if cur.Socket.Token != "secret" || cur.Socket.Path != "/s/sock" {
		t.Errorf("socket after Replace = %+v", cur.Socket)
	}
	if cur.Defaults.Security != "allowlist" || len(cur.Agents["*"].Allowlist) != 1 {
		t.Errorf("Replace did not take the new content: %+v", cur)
	}
	cur.Agents["*"].Allowlist[0].Pattern = "/changed"
	if next.Agents["*"].Allowlist[0].Pattern != "/x/y" {
		t.Error("Replace shares memory with its argument")
	}
}
