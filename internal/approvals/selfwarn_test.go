package approvals

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSelfDefeatingWarnings: `approvals get` (Resolve) warns about an
// allowlisted path the agent's own runs can rewrite (inside the home
// directory, e.g. ~/bin, or a confine.writable root) and about an
// envAllowlist prefix that covers refused names (GIT_*, LD_*), while a
// path in a directory runs cannot write and a prefix of ordinary names
// (the controls) get no such warning.
func TestSelfDefeatingWarnings(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	root := filepath.Join(t.TempDir(), "scratch")
	f, err := Parse("test.json", []byte(`{"version":1,
		"defaults":{"security":"allowlist","envAllowlist":["GIT_*","LD_*","G*","MYAPP_*","LANG"]},
		"agents":{"main":{"confine":{"writable":["`+root+`"]},"allowlist":[
			{"pattern":"~/bin/tool"},
			{"pattern":"`+home+`/proj/build/*"},
			{"pattern":"`+root+`/bin/x"},
			{"pattern":"/usr/local/bin/rg"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	r := f.Resolve("main")
	all := strings.Join(r.Warnings, "\n")
	for _, want := range []string{
		`agents.main.allowlist[0]: pattern "~/bin/tool" lies inside the home directory`,
		`agents.main.allowlist[1]: pattern "` + home + `/proj/build/*" lies inside the home directory`,
		`agents.main.allowlist[2]: pattern "` + root + `/bin/x" lies inside ` + root + `, a writable root`,
		`defaults.envAllowlist[0]: env entry "GIT_*" covers only names that can change what runs`,
		`defaults.envAllowlist[1]: env entry "LD_*" covers only names that can change what runs (LD_PRELOAD`,
		`defaults.envAllowlist[2]: env entry "G*" also covers names that can change what runs (GIT_DIR`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no warning %q in:\n%s", want, all)
		}
	}
	for _, control := range []string{"/usr/local/bin/rg", `"MYAPP_*"`, `"LANG"`} {
		if strings.Contains(all, control) {
			t.Errorf("control %s was warned about:\n%s", control, all)
		}
	}
	// The runtime refusal still holds under the prefix entry: the warning
	// only says what the file cannot do.
	if r.EnvAllowlist == nil || !strings.Contains(strings.Join(r.EnvAllowlist, ","), "GIT_*") {
		t.Errorf("GIT_* dropped from the resolved allowlist: %v", r.EnvAllowlist)
	}
}
