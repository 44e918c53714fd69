package runner

import (
	"errors"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/policy"
	"github.com/google/go-cmp/cmp"
)

func TestBuildEnv(t *testing.T) {
	tests := []struct {
		name    string
		base    []string
		overlay map[string]string
		want    []string
	}{
		{
			name: "empty base stays empty",
			base: []string{},
			want: []string{},
		},
		{
			name:    "overlay is appended in name order",
			base:    []string{"A=1"},
			overlay: map[string]string{"Z": "26", "B": "2"},
			want:    []string{"A=1", "B=2", "Z=26"},
		},
		{
			name:    "overlay replaces every base entry of its name",
			base:    []string{"X=1", "Y=2", "X=3"},
			overlay: map[string]string{"X": "new"},
			want:    []string{"Y=2", "X=new"},
		},
		{
			name: "shell start-up variables are dropped",
			base: []string{"BASH_ENV=/rc", "ENV=/rc", "KEEP=1", "BASH_FUNC_ls%%=() { :; }", "ZDOTDIR=/z", "IFS=x", "PS4=$(id)", "SHELLOPTS=xtrace", "BASHOPTS=x", "KSH_ENV=/k"},
			want: []string{"KEEP=1"},
		},
		{
			name: "unnamed entries are kept",
			base: []string{"=C:=C:\\dir", "A=1"},
			want: []string{"=C:=C:\\dir", "A=1"},
		},
		{
			name:    "an empty value is a value",
			base:    []string{"A=1"},
			overlay: map[string]string{"A": ""},
			want:    []string{"A="},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := buildEnv(tt.base, tt.overlay)
			if err != nil {
				t.Fatalf("buildEnv: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("buildEnv (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildEnvRefuses(t *testing.T) {
	for _, overlay := range []map[string]string{
		{"LD_PRELOAD": "/x.so"},
		{"OK": "1", "BASH_ENV": "/rc"},
		{"bash_env": "/rc"},
		{"ENV": "/rc"},
		{"KSH_ENV": "/rc"},
		{"BASH_FUNC_echo%%": "() { :; }"},
		{"OK": "a\x00b"},
		{"": "x"},
	} {
		if _, err := buildEnv([]string{}, overlay); !errors.Is(err, ErrDangerousEnv) {
			t.Errorf("buildEnv(%q) error = %v, want ErrDangerousEnv", overlay, err)
		}
	}
}

// FuzzBuildEnv feeds request-controlled names and values (the overlay) and
// a base environment, and checks the invariants: a refusal is
// ErrDangerousEnv; otherwise no shell start-up or dangerous name survives,
// and every overlay name appears exactly once, with its value.
func FuzzBuildEnv(f *testing.F) {
	f.Add("FOO", "bar", "BASH_ENV=/rc\x00A=1")
	f.Add("LD_PRELOAD", "/x.so", "")
	f.Add("bash_func_ls%%", "() { :; }", "X=1\x00X=2")
	f.Add("A", "v\x00w", "=C:=C:\\")
	f.Fuzz(func(t *testing.T, name, value, base string) {
		baseEnv := strings.Split(base, "\x00")
		env, err := buildEnv(baseEnv, map[string]string{name: value})
		if err != nil {
			if !errors.Is(err, ErrDangerousEnv) {
				t.Fatalf("buildEnv error %v is not ErrDangerousEnv", err)
			}
			return
		}
		if policy.DangerousEnv(name) || isShellStartupEnv(name) {
			t.Fatalf("overlay name %q accepted", name)
		}
		seen := 0
		for _, kv := range env {
			n, v, _ := strings.Cut(kv, "=")
			if n != "" && isShellStartupEnv(n) {
				t.Errorf("start-up variable %q survived", kv)
			}
			if n == name {
				seen++
				if v != value {
					t.Errorf("%s = %q, want %q", n, v, value)
				}
			}
		}
		if seen != 1 {
			t.Errorf("overlay name %q appears %d times in %q", name, seen, env)
		}
	})
}
