package approvals

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// exechostFile has exechost-only members at every level OpenClaw's schema
// closes: top, socket, defaults, agents, allowlist entries.
const exechostFile = `{"version":1,
 "socket":{"path":"/s.sock","token":"secret","mode":"x"},
 "defaults":{"security":"allowlist","ask":"on-miss","askFallback":"deny","envAllowlist":["GOFLAGS"],"confine":{"network":"loopback"},"grants":["g"]},
 "agents":{
  "*":{"allowlist":[{"id":"A","pattern":"/usr/bin/echo","sha256":"abc","argRules":["x"]},{"pattern":"/usr/bin/id"}]},
  "main":{"ask":"always","envAllowlist":["CI"],"confine":{"network":"none"}},
  "gone":{"security":"full","confine":{"network":"none"}}},
 "futureTop":{"k":1}}`

func TestOpenClawViewHasOnlyOpenClawMembers(t *testing.T) {
	f, err := Parse("t", []byte(exechostFile))
	if err != nil {
		t.Fatal(err)
	}
	view, err := OpenClawView(f)
	if err != nil {
		t.Fatal(err)
	}
	if extra := ocFile.extras(view, ""); len(extra) > 0 {
		t.Fatalf("view has members outside OpenClaw's schema: %v\n%s", extra, view)
	}
	for _, leak := range []string{"secret", "confine", "envAllowlist", "sha256", "argRules", "grants", "futureTop", `"mode"`} {
		if strings.Contains(string(view), leak) {
			t.Errorf("view contains %s:\n%s", leak, view)
		}
	}
	for _, keep := range []string{`"/usr/bin/echo"`, `"always"`, `"id":"A"`, `"on-miss"`} {
		if !strings.Contains(string(view), keep) {
			t.Errorf("view lost %s:\n%s", keep, view)
		}
	}
	want := []string{"socket.mode", "defaults.envAllowlist", "defaults.confine", "defaults.grants",
		"agents.*.allowlist[0].sha256", "agents.*.allowlist[0].argRules", "agents.gone.confine",
		"agents.main.envAllowlist", "agents.main.confine", "futureTop"}
	got := ExechostOnly(f)
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ExechostOnly (-want +got):\n%s", diff)
	}
}

// An edit made in OpenClaw (its view, changed) keeps every exechost-only
// member: the agent it deleted keeps its confine, the entry it kept keeps
// its pin, the defaults it left out keep envAllowlist and confine.
func TestOpenClawEditKeepsExechostOnlyMembers(t *testing.T) {
	cur, err := Parse("t", []byte(exechostFile))
	if err != nil {
		t.Fatal(err)
	}
	view, _ := OpenClawView(cur)
	var doc map[string]any
	if err := json.Unmarshal(view, &doc); err != nil {
		t.Fatal(err)
	}
	agents := doc["agents"].(map[string]any)
	delete(agents, "gone")
	star := agents["*"].(map[string]any)
	star["allowlist"] = append(star["allowlist"].([]any), map[string]any{"pattern": "/usr/bin/uname"})
	delete(doc, "defaults")
	edit, _ := json.Marshal(doc)

	merged, err := MergeOpenClawEdit(cur, edit)
	if err != nil {
		t.Fatal(err)
	}
	next, err := Parse("merged", merged)
	if err != nil {
		t.Fatalf("%v\n%s", err, merged)
	}
	want := ExechostOnly(cur)
	got := ExechostOnly(next)
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exechost-only members after an OpenClaw edit (-before +after):\n%s\n%s", diff, merged)
	}
	if next.Agents["gone"] == nil || next.Agents["gone"].Security != "" || next.Agents["gone"].Confine == nil {
		t.Errorf("deleted agent: want only its confine kept, got %+v", next.Agents["gone"])
	}
	if a := next.Agents["*"].Allowlist; len(a) != 3 || a[0].SHA256 != "abc" || a[2].Pattern != "/usr/bin/uname" {
		t.Errorf("allowlist after the edit: %+v", a)
	}
	if next.Defaults.Security != "" {
		t.Errorf("defaults.security: the edit removed it, got %q", next.Defaults.Security)
	}

	// Control: without the merge, the same edit loses them.
	plain, err := Parse("edit", edit)
	if err != nil {
		t.Fatal(err)
	}
	if lost := ExechostOnly(plain); len(lost) != 0 {
		t.Fatalf("control: the raw edit should carry no exechost-only member, has %v", lost)
	}
}

func TestOpenClawEditWithForeignMembersRefused(t *testing.T) {
	cur, _ := Parse("t", []byte(exechostFile))
	_, err := MergeOpenClawEdit(cur, []byte(`{"version":1,"defaults":{"security":"full","confine":{"network":"all"}}}`))
	if err == nil || !strings.Contains(err.Error(), "defaults.confine") {
		t.Fatalf("want a refusal naming defaults.confine, got %v", err)
	}
}
