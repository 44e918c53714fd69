package explain

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/policy"
)

func parse(t *testing.T, data string) *approvals.File {
	t.Helper()
	f, err := approvals.Parse("test.json", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestUnknownKeys(t *testing.T) {
	f := parse(t, `{"version":1,"defautls":{},"defaults":{"security":"allowlist","asks":"off"},
		"agents":{"main":{"allowlst":[{"pattern":"/usr/bin/make"}],"allowlist":[{"pattern":"/bin/ls","patern":"x"}]},"*":{"_comment":"ok"}}}`)
	want := []string{
		"defautls (did you mean defaults?)",
		"defaults.asks (did you mean ask?)",
		"agents.main.allowlst (did you mean allowlist?)",
		"agents.main.allowlist[0].patern (did you mean pattern?)",
	}
	if diff := cmp.Diff(want, UnknownKeys(f)); diff != "" {
		t.Errorf("UnknownKeys (-want +got):\n%s", diff)
	}
}

// TestComplete checks each denial gets the deciding level and file, the
// fixing command where one exists, and a hint where it does not.
func TestComplete(t *testing.T) {
	f := parse(t, `{"version":1,"defaults":{"security":"allowlist","ask":"off","askFallback":"deny"},
		"agents":{"main":{"allowlst":[]},"ci":{"security":"deny"}}}`)
	for _, tc := range []struct {
		name      string
		start     bridge.Denial // what the execution host sent
		host      Host
		want      bridge.Denial
		hintWants []string
	}{{
		name:  "allowlist miss on a node",
		start: bridge.Denial{Reason: ReasonAllowlistMiss, Missing: []string{"/usr/bin/make"}},
		host:  Host{Name: "n1", Node: "build-box", Path: "/s/exec-approvals.json", File: f, Agent: "main", Requested: policy.SecurityAllowlist},
		want: bridge.Denial{
			Reason: ReasonAllowlistMiss, Missing: []string{"/usr/bin/make"},
			Policy:      &bridge.DenialSource{Host: "n1", File: "/s/exec-approvals.json", Level: "defaults", Setting: "security=allowlist ask=off"},
			UnknownKeys: []string{"agents.main.allowlst (did you mean allowlist?)"},
			Fix:         "exechost approvals allowlist add --node build-box --agent main /usr/bin/make",
		},
		hintWants: []string{"allowlist the executables", "agents.main.allowlst"},
	}, {
		name:  "construct",
		start: bridge.Denial{Reason: ReasonAllowlistMiss, Construct: "command substitution $(…)", Position: "1:6"},
		host:  Host{Name: "gateway", Path: "/g/exec-approvals.json", File: f, Agent: "*"},
		want: bridge.Denial{
			Reason: ReasonAllowlistMiss, Construct: "command substitution $(…)", Position: "1:6",
			Policy:      &bridge.DenialSource{Host: "gateway", File: "/g/exec-approvals.json", Level: "defaults", Setting: "security=allowlist ask=off"},
			UnknownKeys: []string{"agents.main.allowlst (did you mean allowlist?)"},
		},
		hintWants: []string{"rewrite the command without command substitution $(…)"},
	}, {
		name:  "security=deny from the agent's level",
		start: bridge.Denial{Reason: ReasonDisabled},
		host:  Host{Name: "n1", Node: "n1", Path: "/s/exec-approvals.json", File: f, Agent: "ci"},
		want: bridge.Denial{
			Reason:      ReasonDisabled,
			Policy:      &bridge.DenialSource{Host: "n1", File: "/s/exec-approvals.json", Level: "agents.ci", Setting: "security=deny"},
			UnknownKeys: []string{"agents.main.allowlst (did you mean allowlist?)"},
		},
		hintWants: []string{"security is deny on n1", "exechost approvals set --node n1 --file F"},
	}, {
		name:  "security=deny requested by the caller",
		start: bridge.Denial{Reason: ReasonDisabled},
		host:  Host{Name: "n1", Node: "n1", Path: "/s/exec-approvals.json", File: f, Agent: "main", Requested: policy.SecurityDeny},
		want: bridge.Denial{
			Reason:      ReasonDisabled,
			Policy:      &bridge.DenialSource{Host: "n1", Level: "request", Setting: "security=deny"},
			UnknownKeys: []string{"agents.main.allowlst (did you mean allowlist?)"},
		},
		hintWants: []string{"requested security is deny"},
	}, {
		name:  "a name not found has no precise fix",
		start: bridge.Denial{Reason: ReasonAllowlistMiss, Missing: []string{"nosuch (not found on PATH)"}},
		host:  Host{Name: "this machine"},
		want:  bridge.Denial{Reason: ReasonAllowlistMiss, Missing: []string{"nosuch (not found on PATH)"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.start
			Complete(&d, tc.host)
			hint := d.Hint
			d.Hint = ""
			if diff := cmp.Diff(tc.want, d); diff != "" {
				t.Errorf("Complete (-want +got):\n%s", diff)
			}
			for _, w := range tc.hintWants {
				if !strings.Contains(hint, w) {
					t.Errorf("hint %q lacks %q", hint, w)
				}
			}
		})
	}
}

func TestText(t *testing.T) {
	got := Text(&bridge.Denial{
		Missing: []string{"/usr/bin/make"}, Construct: "eval", Position: "1:1",
		Policy:      &bridge.DenialSource{Host: "n1", File: "/s/a.json", Level: "agents.*", Setting: "security=allowlist ask=off"},
		UnknownKeys: []string{"x"}, Fix: "exechost approvals allowlist add /usr/bin/make", Hint: "do it",
	})
	want := "missing: /usr/bin/make\nconstruct: eval at 1:1\npolicy: security=allowlist ask=off from agents.* (host n1, /s/a.json)\n" +
		"unknown keys in the approvals file: x\nfix: exechost approvals allowlist add /usr/bin/make\nhint: do it\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Text (-want +got):\n%s", diff)
	}
	if Text(nil) != "" {
		t.Error("Text(nil) is not empty")
	}
}
