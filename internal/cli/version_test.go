package cli

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"go install @version", debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}}, "v0.4.0"},
		{"checkout", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "99486f7aabbccddeeff00112233"}, {Key: "vcs.modified", Value: "true"}}}, "dev-99486f7aabbc-dirty"},
		{"nothing recorded", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
	} {
		if got := versionOf(&tc.bi); got != tc.want {
			t.Errorf("%s: versionOf = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestVersionFlag: --version and `version` print the same line.
func TestVersionFlag(t *testing.T) {
	var flag, cmd, errb bytes.Buffer
	if code := run([]string{"--version"}, &flag, &errb); code != ExitOK {
		t.Fatalf("--version: exit %d: %s", code, errb.String())
	}
	if code := run([]string{"version"}, &cmd, &errb); code != ExitOK {
		t.Fatalf("version: exit %d: %s", code, errb.String())
	}
	if !strings.HasPrefix(flag.String(), "exechost ") || flag.String() != cmd.String() {
		t.Errorf("--version printed %q, version printed %q", flag.String(), cmd.String())
	}
}
