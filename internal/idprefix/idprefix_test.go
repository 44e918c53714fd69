package idprefix

import (
	"slices"
	"testing"
)

func TestMatch(t *testing.T) {
	ids := []string{"abc123", "abd456", "abc", "zzz999"}
	tests := []struct {
		name   string
		q      string
		minLen int
		want   []string
	}{
		{name: "exact id", q: "abd456", minLen: 4, want: []string{"abd456"}},
		{name: "exact beats the ids it prefixes", q: "abc", minLen: 1, want: []string{"abc"}},
		{name: "unique prefix", q: "zz", minLen: 1, want: []string{"zzz999"}},
		{name: "ambiguous prefix lists all, sorted", q: "ab", minLen: 1, want: []string{"abc", "abc123", "abd456"}},
		{name: "too short", q: "zz", minLen: 3, want: nil},
		{name: "long enough", q: "zzz", minLen: 3, want: []string{"zzz999"}},
		{name: "unknown", q: "q", minLen: 1, want: nil},
		{name: "empty matches nothing", q: "", minLen: 0, want: nil},
		{name: "minLen below 1 is 1", q: "z", minLen: -5, want: []string{"zzz999"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Match(ids, tt.q, tt.minLen); !slices.Equal(got, tt.want) {
				t.Fatalf("Match(%q, %d) = %q, want %q", tt.q, tt.minLen, got, tt.want)
			}
		})
	}
	if got := Match([]string{"dup", "dup1", "dup1"}, "dup1", 1); !slices.Equal(got, []string{"dup1"}) {
		t.Fatalf("duplicate ids: %q", got)
	}
	if got := Match([]string{"x12", "x12", "x13"}, "x1", 1); !slices.Equal(got, []string{"x12", "x13"}) {
		t.Fatalf("duplicate prefix matches: %q", got)
	}
}
