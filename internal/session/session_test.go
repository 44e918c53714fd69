package session

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/policy"
)

func TestEventTexts(t *testing.T) {
	tests := []struct{ got, want string }{
		{StartedText("n1", "r1"), "Exec started (node=n1, id=r1)"},
		{FinishedText("n1", "r1", 3, ""), "Exec finished (node=n1, id=r1, code=3)"},
		{FinishedText("n1", "r1", 0, "hello\n"), "Exec finished (node=n1, id=r1, code=0)\nhello\n"},
		{DeniedText("n1", "r1", "SYSTEM_RUN_DENIED: allowlist miss"), "Exec denied (node=n1, id=r1, SYSTEM_RUN_DENIED: allowlist miss)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestQueueIsPerSessionAndBounded(t *testing.T) {
	s := NewStore()
	a, b := NewKey("", ""), NewKey("ops", "s2")
	s.Enqueue(a, bridge.SystemEvent{Text: "one"})
	s.Enqueue(b, bridge.SystemEvent{Text: "other"})
	if got := texts(s.Drain(a)); !cmp.Equal(got, []string{"one"}) {
		t.Errorf("Drain(a) = %q", got)
	}
	if got := texts(s.Drain(a)); len(got) != 0 {
		t.Errorf("second Drain(a) = %q, want empty", got)
	}
	if got := texts(s.Drain(b)); !cmp.Equal(got, []string{"other"}) {
		t.Errorf("Drain(b) = %q", got)
	}
	for i := range MaxEvents + 7 {
		s.Enqueue(a, bridge.SystemEvent{Text: fmt.Sprint(i)})
	}
	got := texts(s.Drain(a))
	if len(got) != MaxEvents+1 {
		t.Fatalf("Drain after flood returned %d events, want %d", len(got), MaxEvents+1)
	}
	if !strings.HasPrefix(got[0], "… 7 earlier system events dropped") {
		t.Errorf("marker = %q", got[0])
	}
	if got[1] != "7" || got[len(got)-1] != fmt.Sprint(MaxEvents+6) {
		t.Errorf("kept %q … %q, want the newest", got[1], got[len(got)-1])
	}
}

func texts(evs []bridge.SystemEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Text)
	}
	return out
}

func TestCommands(t *testing.T) {
	type step struct {
		text    string
		want    bridge.SessionSettings
		wantErr string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"exec sets and shows", []step{
			{text: "/exec host=node security=allowlist ask=always node=build", want: bridge.SessionSettings{Host: "node", Security: "allowlist", Ask: "always", Node: "build"}},
			{text: "/exec", want: bridge.SessionSettings{Host: "node", Security: "allowlist", Ask: "always", Node: "build"}},
			{text: "/exec node=default ask=default", want: bridge.SessionSettings{Host: "node", Security: "allowlist"}},
		}},
		{"invalid values change nothing", []step{
			{text: "/exec host=gateway", want: bridge.SessionSettings{Host: "gateway"}},
			{text: "/exec host=node security=yolo", wantErr: "accepted: deny, allowlist, full"},
			{text: "/exec", want: bridge.SessionSettings{Host: "gateway"}},
			{text: "/exec colour=red", wantErr: "accepted: host, security, ask, node"},
			{text: "/exec host", wantErr: "key=value"},
		}},
		{"elevated round trip", []step{
			{text: "/exec host=node security=allowlist", want: bridge.SessionSettings{Host: "node", Security: "allowlist"}},
			{text: "/elevated on", want: bridge.SessionSettings{Host: "gateway", Security: "full", Elevated: "on"}},
			{text: "/elevated full", want: bridge.SessionSettings{Host: "gateway", Security: "full", Ask: "off", Elevated: "full"}},
			{text: "/elevated ask", want: bridge.SessionSettings{Host: "gateway", Security: "full", Ask: "always", Elevated: "ask"}},
			{text: "/elevated off", want: bridge.SessionSettings{Host: "node", Security: "allowlist"}},
			{text: "/elevated off", want: bridge.SessionSettings{Host: "node", Security: "allowlist"}},
			{text: "/elevated maybe", wantErr: "accepted: on, off, ask, full"},
			{text: "/elevated", wantErr: "accepted: on, off, ask, full"},
		}},
		{"unknown", []step{{text: "/sudo", wantErr: "unknown command"}, {text: "", wantErr: "unknown command"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStore()
			k := NewKey("a", "s")
			for _, st := range tt.steps {
				res, err := s.Command(k, st.text)
				if st.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), st.wantErr) {
						t.Fatalf("Command(%q) = %v, want error containing %q", st.text, err, st.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatalf("Command(%q): %v", st.text, err)
				}
				if diff := cmp.Diff(st.want, res.Settings); diff != "" {
					t.Fatalf("Command(%q) settings (-want +got):\n%s", st.text, diff)
				}
				if res.Reply == "" {
					t.Errorf("Command(%q) gave no reply", st.text)
				}
			}
		})
	}
	// Overrides are per agent and session.
	s := NewStore()
	if _, err := s.Command(NewKey("a", "s"), "/exec host=gateway"); err != nil {
		t.Fatal(err)
	}
	if got := s.Overrides(NewKey("b", "s")); got != (policy.Settings{}) {
		t.Errorf("another agent sees overrides %+v", got)
	}
	if got := s.Overrides(NewKey("a", "s")); got.Host != policy.HostGateway {
		t.Errorf("overrides = %+v", got)
	}
	if _, err := s.Command(NewKey("a", "s"), "/exec host=x"); !errors.Is(err, policy.ErrInvalidValue) {
		t.Errorf("invalid host error = %v, want ErrInvalidValue", err)
	}
}

func FuzzCommand(f *testing.F) {
	f.Add("/exec host=node security=full ask=off node=x")
	f.Add("/elevated full")
	f.Fuzz(func(t *testing.T, text string) {
		s := NewStore()
		res, err := s.Command(NewKey("a", "s"), text)
		if err != nil {
			return
		}
		if res.Settings.Host != "" && !policy.Host(res.Settings.Host).Valid() {
			t.Fatalf("accepted host %q from %q", res.Settings.Host, text)
		}
		if res.Settings.Security != "" && !policy.Security(res.Settings.Security).Valid() {
			t.Fatalf("accepted security %q from %q", res.Settings.Security, text)
		}
	})
}

// TestStoreForgetsLeastRecentlyUsed fills the store to MaxSessions, uses
// the oldest session again, and checks that new sessions then push out the
// least recently used ones in order, never the one just used.
func TestStoreForgetsLeastRecentlyUsed(t *testing.T) {
	s := NewStore()
	key := func(i int) Key { return NewKey("a", fmt.Sprint("s", i)) }
	for i := range MaxSessions {
		s.Enqueue(key(i), bridge.SystemEvent{Text: "x"})
	}
	_ = s.Overrides(key(0)) // session 0 is now the most recently used
	for i := range 3 {
		s.Enqueue(key(MaxSessions+i), bridge.SystemEvent{Text: "y"})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sessions) != MaxSessions || s.lru.Len() != MaxSessions {
		t.Fatalf("store holds %d sessions (%d in lru order); want %d", len(s.sessions), s.lru.Len(), MaxSessions)
	}
	if ss := s.sessions[key(0)]; ss == nil || len(ss.events) != 1 {
		t.Error("the session used last was forgotten")
	}
	for i := 1; i <= 3; i++ {
		if s.sessions[key(i)] != nil {
			t.Errorf("session %d, least recently used, is still kept", i)
		}
	}
	if s.sessions[key(4)] == nil {
		t.Error("session 4 was forgotten before it was the least recently used")
	}
}

// BenchmarkNewSessionFull times what a new session key costs once the
// store holds MaxSessions.
func BenchmarkNewSessionFull(b *testing.B) {
	s := NewStore()
	keys := make([]Key, MaxSessions+b.N)
	for i := range keys {
		keys[i] = NewKey("a", fmt.Sprint("s", i))
	}
	for _, k := range keys[:MaxSessions] {
		_ = s.Overrides(k)
	}
	b.ResetTimer()
	for _, k := range keys[MaxSessions:] {
		_ = s.Overrides(k)
	}
}

func TestOnceIsPerSessionAndNotice(t *testing.T) {
	s := NewStore()
	a, b := NewKey("main", "a"), NewKey("main", "b")
	got := []bool{s.Once(a, KindSandbox), s.Once(a, KindSandbox), s.Once(b, KindSandbox), s.Once(a, "other"), s.Once(b, KindSandbox)}
	if diff := cmp.Diff([]bool{true, false, true, true, false}, got); diff != "" {
		t.Errorf("Once (-want +got):\n%s", diff)
	}
	if got, want := SandboxText("docker", "r1", "resident agent (static): x"), "Sandbox docker (id=r1): commands: resident agent (static): x"; got != want {
		t.Errorf("SandboxText = %q, want %q", got, want)
	}
}
