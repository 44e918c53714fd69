package shellcmd

import "testing"

func TestRunsAnything(t *testing.T) {
	for _, p := range []string{"/usr/bin/find", "/usr/bin/xargs", "/usr/bin/git", "/usr/bin/rg", "/usr/bin/awk", "/usr/bin/sed",
		"/usr/bin/python3.12", "/bin/bash", "/usr/bin/npm", "/usr/bin/env", "/usr/bin/sudo", "/usr/bin/apt-get"} {
		if why, ok := RunsAnything(p); !ok || why == "" {
			t.Errorf("RunsAnything(%q) = %q, %v; want flagged", p, why, ok)
		}
	}
	for _, p := range []string{"/usr/bin/ls", "/usr/bin/head", "/usr/bin/wc", "/usr/bin/cat"} {
		if why, ok := RunsAnything(p); ok {
			t.Errorf("RunsAnything(%q) = %q: not a program that runs others", p, why)
		}
	}
}
