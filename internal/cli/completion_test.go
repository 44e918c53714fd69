package cli

import (
	"errors"
	"strings"
	"testing"
)

func TestCompletion(t *testing.T) {
	for shell, marker := range map[string]string{
		"bash":       "__start_exechost",
		"zsh":        "#compdef exechost",
		"fish":       "complete -c exechost",
		"powershell": "Register-ArgumentCompleter",
	} {
		t.Run(shell, func(t *testing.T) {
			out, _, err := execCLI(t, "completion", shell)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, marker) {
				t.Errorf("%s completion lacks %q", shell, marker)
			}
		})
	}
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}, {"completion", "bash", "zsh"}} {
		_, _, err := execCLI(t, args...)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: err %v, want a usage error", args, err)
		}
	}
}

// TestCompletionCompletesSubcommands runs cobra's completion protocol, as
// the generated scripts do.
func TestCompletionCompletesSubcommands(t *testing.T) {
	out, _, err := execCLI(t, "__complete", "aud")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "audit") {
		t.Errorf("completing 'aud' gave %q, want audit", out)
	}
	out, _, err = execCLI(t, "__complete", "completion", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		if !strings.Contains(out, sh) {
			t.Errorf("completing shells gave %q, want %s", out, sh)
		}
	}
}
