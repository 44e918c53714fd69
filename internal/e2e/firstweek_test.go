package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNameTakenStops: a node whose display name another paired node holds
// (a second state directory on the same machine, a cloned VM) stops at
// once with exit 1 and the fix (another --display-name, or `nodes remove`
// of the old pairing), instead of retrying forever at INFO. Before the
// fix this run hit run's deadline (cmdLimit) still reconnecting.
func TestNameTakenStops(t *testing.T) {
	c := newCluster(t, gatewayConfig)
	first := c.addNode("first", "build-box", policyFull)
	r := run(t, newStateDir(t, "clone"), "node", "run", "--gateway", c.url, "--display-name", "Build-Box")
	if r.code != 1 {
		t.Fatalf("a node with a taken name: want exit 1, got %s", r)
	}
	for _, want := range []string{`display name "Build-Box" is already taken by node ` + first.id[:8] + "…", "--display-name NAME", "exechost nodes remove " + first.id} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "reconnecting") {
		t.Errorf("the node retried:\n%s", r.stderr)
	}
}

// TestNodeRunSaysStopped: `node run` stopped by a signal exits 0 and says
// it stopped (before, it printed nothing and a terminal could not tell a
// stop from a hang).
func TestNodeRunSaysStopped(t *testing.T) {
	c := newCluster(t, gatewayConfig)
	n := c.addNode("n", "stopper", policyFull)
	n.p.signal(os.Interrupt)
	if err := n.p.wait(t, "node run after SIGINT"); err != nil {
		t.Fatalf("node run after SIGINT: %v\n%s", err, n.p.Out)
	}
	if !strings.Contains(n.p.Out.String(), "exechost: node stopped") {
		t.Errorf("node run printed nothing on stop:\n%s", n.p.Out)
	}
}

// TestBashCompletionWithoutPackage: the bash script completes commands
// and flag values in a bash without the bash-completion package (--norc:
// nothing sourced), with no "command not found" on any Tab. The control
// is cobra's script alone, which needs that package's
// _get_comp_words_by_ref.
func TestBashCompletionWithoutPackage(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash on this machine")
	}
	// complete LINE… sets COMP_WORDS to the words (the last is the one
	// being completed) and prints what __start_exechost offers.
	const cases = `
complete_words() {
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    COMPREPLY=()
    __start_exechost exechost "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" 2>>"$ERRS"
    echo "[$*] ${COMPREPLY[*]}"
}
complete_words exechost aud
complete_words exechost exec --security ''
complete_words exechost exec --ask ''
complete_words exechost exec --host = s
complete_words exechost approvals allowlist add --agent ''
`
	run := func(source string) (out, errs string) {
		errFile := filepath.Join(t.TempDir(), "errs")
		cmd := exec.Command(bash, "--norc", "--noprofile", "-c", "COLUMNS=200\n"+source+cases)
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
			"ERRS="+errFile, "OPENCLAW_STATE_DIR="+newStateDir(t, "completion"))
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, b)
		}
		e, _ := os.ReadFile(errFile)
		return string(b), string(e)
	}
	out, errs := run("source <(exechost completion bash)\n")
	if strings.Contains(out+errs, "command not found") {
		t.Errorf("a Tab printed \"command not found\":\n%s%s", out, errs)
	}
	for _, want := range []string{"[exechost aud] audit", "deny", "allowlist", "full", "on-miss", "always", "[exechost exec --host = s] sandbox", "main"} {
		if !strings.Contains(out, want) {
			t.Errorf("completions lack %q:\n%s", want, out)
		}
	}
	// Control: cobra's script without the stand-in fails in this bash.
	out, errs = run("source <(exechost completion bash | sed -n '/^# bash completion/,$p')\n")
	if !strings.Contains(out+errs, "_get_comp_words_by_ref: command not found") {
		t.Errorf("control: cobra's script alone did not fail without bash-completion:\n%s%s", out, errs)
	}
}

// TestDeclinedPromptExitsAsRefusal: answering "n" at `allowlist add`'s
// terminal prompt adds nothing and exits 2, as the refusal off a terminal
// does (it used to exit 1). The terminal is a real one (tmux).
func TestDeclinedPromptExitsAsRefusal(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("no tmux on this machine")
	}
	dir := newStateDir(t, "declined")
	writeFile(t, filepath.Join(dir, "exec-approvals.json"), `{"version":1,"defaults":{"security":"allowlist"}}`)
	status := filepath.Join(t.TempDir(), "status")
	sock := filepath.Join(t.TempDir(), "tmux.sock")
	session := "declined"
	line := fmt.Sprintf("%s --state-dir %s approvals allowlist add /bin/sh; echo $? > %s", bin, dir, status)
	if out, err := exec.Command(tmux, "-S", sock, "new-session", "-d", "-s", session, "-x", "200", "-y", "50", line).CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(tmux, "-S", sock, "kill-server").Run() })
	waitFor(t, "the confirmation prompt", func() bool {
		out, _ := exec.Command(tmux, "-S", sock, "capture-pane", "-p", "-t", session).Output()
		return strings.Contains(string(out), "anyway? [y/N]")
	})
	if out, err := exec.Command(tmux, "-S", sock, "send-keys", "-t", session, "n", "Enter").CombinedOutput(); err != nil {
		t.Fatalf("send-keys: %v\n%s", err, out)
	}
	var code string
	waitFor(t, "the exit status", func() bool {
		b, err := os.ReadFile(status)
		code = strings.TrimSpace(string(b))
		return err == nil && code != ""
	})
	if code != "2" {
		t.Errorf("declined prompt exited %s, want 2 (as off a terminal)", code)
	}
	if strings.Contains(string(mustRead(t, filepath.Join(dir, "exec-approvals.json"))), "/bin/sh") {
		t.Errorf("a declined pattern was added")
	}
}
