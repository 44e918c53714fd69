package logging

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// tok looks like a real gateway token (base64url, 43 chars).
const tok = "q7Xv2Lr0b9ZtK3mP1wYcN8dE5hJ4uA6sF0gH2kR7tU9"

type nodeFile struct {
	NodeID string `json:"nodeId"`
	Token  string `json:"token"`
}

type textOnly struct{ Token string } // no json tags; %+v still shows it

func TestNoSecretInOutput(t *testing.T) {
	logs := []struct {
		name string
		log  func(*slog.Logger)
	}{
		{"token key", func(l *slog.Logger) { l.Info("connect", "token", tok) }},
		{"camelCase key", func(l *slog.Logger) { l.Info("connect", "gatewayToken", tok) }},
		{"joinKey", func(l *slog.Logger) { l.Info("pair", "joinKey", tok) }},
		{"hmac", func(l *slog.Logger) { l.Warn("bad frame", "HMAC", tok) }},
		{"authorization header", func(l *slog.Logger) { l.Info("req", "Authorization", "Bearer "+tok) }},
		{"password int", func(l *slog.Logger) { l.Info("x", "password", 12345) }},
		{"group named secret", func(l *slog.Logger) { l.Info("x", slog.Group("secrets", "a", tok)) }},
		{"nested token in group", func(l *slog.Logger) { l.Info("x", slog.Group("auth", "token", tok)) }},
		{"With attrs", func(l *slog.Logger) { l.With("token", tok).Info("x") }},
		{"WithGroup", func(l *slog.Logger) { l.WithGroup("auth").Info("x", "token", tok) }},
		{"in message", func(l *slog.Logger) { l.Info("dial ws://127.0.0.1:18789/?token=" + tok) }},
		{"in url attr", func(l *slog.Logger) { l.Info("dial", "url", "ws://h/?a=1&token="+tok+"&b=2") }},
		{"json in string", func(l *slog.Logger) { l.Info("frame", "raw", `{"auth":{"token":"`+tok+`"}}`) }},
		{"bearer in error", func(l *slog.Logger) {
			l.Error("upstream", "err", fmt.Errorf("request failed: %w", errors.New("Authorization: Bearer "+tok)))
		}},
		{"struct with json tags", func(l *slog.Logger) { l.Info("saved", "node", nodeFile{NodeID: "n1", Token: tok}) }},
		{"struct without json tags", func(l *slog.Logger) { l.Info("saved", "node", textOnly{Token: tok}) }},
		{"map", func(l *slog.Logger) { l.Info("cfg", "cfg", map[string]any{"socket": map[string]string{"token": tok}}) }},
		{"token= in text", func(l *slog.Logger) { l.Info("x", "detail", "token="+tok) }},
	}
	for _, format := range []string{FormatText, FormatJSON} {
		for _, tt := range logs {
			t.Run(format+"/"+tt.name, func(t *testing.T) {
				var buf bytes.Buffer
				l, err := New(&buf, format, "debug")
				if err != nil {
					t.Fatal(err)
				}
				tt.log(l)
				out := buf.String()
				if out == "" {
					t.Fatal("nothing logged")
				}
				for _, secret := range []string{tok, tok[:20], "12345"} {
					if strings.Contains(out, secret) {
						t.Errorf("secret %q leaked: %s", secret, out)
					}
				}
				if !strings.Contains(out, Redacted) {
					t.Errorf("no %s marker in %s", Redacted, out)
				}
			})
		}
	}
}

func TestKeepsOrdinaryValues(t *testing.T) {
	var buf bytes.Buffer
	l, err := New(&buf, FormatJSON, "")
	if err != nil {
		t.Fatal(err)
	}
	hash := "3f786850e387550fdab836ed7e6dc881de23001b"
	l.Info("exec finished", "runId", "run-1", "hash", hash, "tokens", 0, "node", nodeFile{NodeID: "n1"})
	out := buf.String()
	for _, want := range []string{"run-1", hash, `"nodeId":"n1"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q: %s", want, out)
		}
	}
}

func TestRedactIdempotent(t *testing.T) {
	s, _ := scrub("token=" + tok)
	again, changed := scrub(s)
	if changed || again != "token="+Redacted {
		t.Errorf("scrub(%q) = %q, %v; want unchanged token=%s", s, again, changed, Redacted)
	}
}

func TestNewLevelsAndFormats(t *testing.T) {
	tests := []struct {
		format, level string
		wantErr       bool
		debugShown    bool
		prefix        string
	}{
		{"", "", false, false, "time="},
		{"text", "debug", false, true, "time="},
		{"JSON", "warn", false, false, "{"},
		{"json", "DEBUG", false, true, "{"},
		{"xml", "info", true, false, ""},
		{"text", "loud", true, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.format+"/"+tt.level, func(t *testing.T) {
			var buf bytes.Buffer
			l, err := New(&buf, tt.format, tt.level)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "hint:") {
					t.Fatalf("New(%q, %q) = %v, want an error with a hint", tt.format, tt.level, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			l.Debug("dbg")
			l.Error("err")
			out := buf.String()
			if got := strings.Contains(out, "dbg"); got != tt.debugShown {
				t.Errorf("debug shown = %v, want %v: %s", got, tt.debugShown, out)
			}
			if !strings.HasPrefix(out, tt.prefix) {
				t.Errorf("output %q does not start with %q", out, tt.prefix)
			}
		})
	}
}

func FuzzScrub(f *testing.F) {
	f.Add("token=" + tok)
	f.Add("Authorization: Bearer abc")
	f.Add(`{"password":"x"}`)
	f.Add("nothing here")
	f.Add("TOKEN=abc ſecret: x") // Kelvin sign and long s fold to k and s
	f.Add("x-Api_Key: y; BEARER z")
	for _, w := range inlineWords {
		f.Add(strings.ToUpper(w) + "=v1 and " + w + `":"v2"`)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, changed := scrub(s)
		// The fast path changes nothing: what it skips, the patterns leave.
		if want, wantChanged := scrubAlways(s); out != want || changed != wantChanged {
			t.Fatalf("scrub(%q) = %q, %v; the patterns give %q, %v", s, out, changed, want, wantChanged)
		}
		// Idempotent: scrubbing scrubbed text changes nothing.
		if again, changed := scrub(out); changed {
			t.Fatalf("scrub not idempotent: %q -> %q -> %q", s, out, again)
		}
		// A token=value pair never survives.
		secret := "Zz9" + strings.Repeat("k", 10)
		if o, _ := scrub(s + " token=" + secret); strings.Contains(o, secret) {
			t.Fatalf("token leaked through %q: %q", s, o)
		}
	})
}
