package gateway

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"Build Box":       "build-box",
		"  build__box!! ": "build-box",
		"MacBook Pro (2)": "macbook-pro-2",
		"---":             "",
		"Ünïcode Näme":    "ünïcode-näme",
	} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSelect(t *testing.T) {
	nodes := []Candidate{
		{ID: "aaaaaa111111", DisplayName: "Build Box", RemoteIP: "10.0.0.1", Connected: true},
		{ID: "aaaaaa222222", DisplayName: "laptop", RemoteIP: "10.0.0.2", Connected: false},
		{ID: "bbbbbb333333", DisplayName: "laptop", RemoteIP: "10.0.0.3", Connected: true},
		{ID: "cccccc444444", DisplayName: "twin", RemoteIP: "10.0.0.9", Connected: false},
		{ID: "cccccc555555", DisplayName: "twin", RemoteIP: "10.0.0.9", Connected: false},
		{ID: "10.0.0.2", DisplayName: "odd", Connected: true},
	}
	tests := []struct {
		q       string
		want    string
		wantErr error
		names   []string // every candidate an error must name
	}{
		{q: "aaaaaa111111", want: "aaaaaa111111"},
		{q: "build box", want: "aaaaaa111111"},
		{q: "BUILD-BOX", want: "aaaaaa111111"},
		{q: "laptop", want: "bbbbbb333333"},   // two matches, one connected
		{q: "10.0.0.1", want: "aaaaaa111111"}, // remote IP
		{q: "10.0.0.2", want: "10.0.0.2"},     // exact id beats remote IP
		{q: "bbbbbb", want: "bbbbbb333333"},   // prefix of 6
		{q: "cccccc4", want: "cccccc444444"},  // longer prefix
		{q: "bbbbb", wantErr: ErrNoNode},      // prefix too short
		{q: "aaaaaa", want: "aaaaaa111111"},   // ambiguous prefix, one connected
		{q: "cccccc", wantErr: ErrAmbiguousNode, names: []string{"cccccc444444", "cccccc555555"}},
		{q: "twin", wantErr: ErrAmbiguousNode, names: []string{"cccccc444444", "cccccc555555"}},
		{q: "10.0.0.9", wantErr: ErrAmbiguousNode, names: []string{"cccccc444444", "cccccc555555"}},
		{q: "nowhere", wantErr: ErrNoNode},
		{q: "", wantErr: ErrNoNode},
	}
	for _, tt := range tests {
		t.Run(tt.q, func(t *testing.T) {
			got, err := Select(nodes, tt.q)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Select(%q) = %v, %v; want %v", tt.q, got, err, tt.wantErr)
				}
				for _, n := range tt.names {
					if !strings.Contains(err.Error(), n) {
						t.Errorf("error %q does not name candidate %s", err, n)
					}
				}
				return
			}
			if err != nil || got.ID != tt.want {
				t.Fatalf("Select(%q) = %v, %v; want %s", tt.q, got.ID, err, tt.want)
			}
		})
	}
}

func FuzzSelect(f *testing.F) {
	f.Add("Build Box")
	f.Add("aaaaaa")
	f.Fuzz(func(t *testing.T, q string) {
		nodes := []Candidate{{ID: "aaaaaa111111", DisplayName: "Build Box", Connected: true}, {ID: "aaaaaa222222", DisplayName: "x"}}
		got, err := Select(nodes, q)
		if err == nil && got.ID == "" {
			t.Fatalf("Select(%q) returned an empty node without error", q)
		}
	})
}

func TestCleanText(t *testing.T) {
	for in, want := range map[string]string{
		"Build Box":               "Build Box",
		"evil\x1b[2J\x1b]0;x\x07": "evil[2J]0;x",
		"rtl\u202egnp.exe":        "rtlgnp.exe",
		"zero\u200bwidth":         "zerowidth",
		"bad\xffutf8":             "badutf8",
		"  spaced  ":              "spaced",
	} {
		if got := cleanText(in, 64); got != want {
			t.Errorf("cleanText(%q) = %q, want %q", in, got, want)
		}
	}
	if got := cleanText(strings.Repeat("é", 100), 64); len([]rune(got)) != 64 {
		t.Errorf("cleanText kept %d runes, want 64", len([]rune(got)))
	}
}

func FuzzCleanText(f *testing.F) {
	f.Add("Build Box\x1b[0m\u202e")
	f.Fuzz(func(t *testing.T, s string) {
		got := cleanText(s, 64)
		for _, r := range got {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
				t.Fatalf("cleanText(%q) kept %U", s, r)
			}
		}
		if n := len([]rune(got)); n > 64 {
			t.Fatalf("cleanText(%q) kept %d runes", s, n)
		}
	})
}
