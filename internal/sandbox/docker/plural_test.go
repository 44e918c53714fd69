package docker

import "testing"

// TestPlural: the carried-loader reason counts libraries in English
// ("1 library", not "1 libraries").
func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 libraries", 1: "1 library", 2: "2 libraries"} {
		if got := plural(n, "library", "libraries"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}
