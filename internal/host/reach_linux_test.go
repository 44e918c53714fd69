package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/policy"
)

// TestNoCwdRunsInWorkspace runs requests that name no cwd through the
// engine for real: they start in the agent's workspace, so neither a
// relative write (`marker .bashrc`, allowlisted) nor shell text aimed at
// the home (`echo … >> ~/.bashrc`, under security=full with a jail)
// changes anything in ~. The control runs the same requests with the
// home as their cwd (what a run without one got before): the writes land
// in ~, so what keeps them out is the default cwd.
func TestNoCwdRunsInWorkspace(t *testing.T) {
	needABI(t, 4)
	for _, control := range []bool{false, true} {
		name := map[bool]string{false: "workspace", true: "control: cwd ~"}[control]
		t.Run(name, func(t *testing.T) {
			j := newJailFixture(t, policy.SecurityAllowlist)
			bashrc := filepath.Join(j.home, ".bashrc")
			before, err := os.ReadFile(bashrc)
			if err != nil {
				t.Fatal(err)
			}
			cwd := ""
			if control {
				cwd = j.home
			}
			// Relative: lands in the cwd. "planted" is no persistence path,
			// so the control shows the write whatever the jail keeps
			// read-only.
			// With ~ as a writable root Landlock admits no new entry in ~
			// itself (a missing persistence path must stay uncreatable),
			// so the control plants beneath ~/docs.
			plant := "planted"
			if control {
				plant = filepath.Join("docs", "planted")
			}
			for _, target := range []string{".bashrc-new", plant} {
				if _, err := j.engine.Run(context.Background(), Request{RawCommand: "marker " + target, Cwd: cwd, AgentID: "dev"}); err != nil {
					t.Fatal(err)
				}
			}
			_, plantedErr := os.Stat(filepath.Join(j.home, plant))
			if got := plantedErr == nil; got != control {
				t.Errorf("marker planted with cwd %q wrote in ~ = %v, want %v", cwd, got, control)
			}
			if !control {
				ws := filepath.Join(j.home, workspacesDir, "dev")
				for _, f := range []string{".bashrc-new", "planted"} {
					if _, err := os.Stat(filepath.Join(ws, f)); err != nil {
						t.Errorf("the relative write did not land in the workspace: %v", err)
					}
				}
				if fi, err := os.Stat(ws); err != nil || fi.Mode().Perm() != 0o700 {
					t.Errorf("workspace %s: %v %v, want a 0700 directory", ws, fi, err)
				}
			}

			// Shell text under security=full with a jail, aimed at ~ by
			// absolute path.
			if _, err := j.store.Update(func(f *approvals.File) error {
				f.Defaults.Security, f.Defaults.Confine = string(policy.SecurityFull), &approvals.Confine{}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			res, err := j.engine.Run(context.Background(), Request{RawCommand: "pwd; echo pwned >> " + bashrc + "; echo x > " + filepath.Join(j.home, "docs", "planted2"), Cwd: cwd})
			if err != nil {
				t.Fatal(err)
			}
			after, _ := os.ReadFile(bashrc)
			_, planted2Err := os.Stat(filepath.Join(j.home, "docs", "planted2"))
			wroteHome := string(after) != string(before) || planted2Err == nil
			if wroteHome != control {
				t.Errorf("shell text with cwd %q wrote in ~ = %v, want %v (%+v)", cwd, wroteHome, control, res.Result)
			}
			if wantPwd := filepath.Join(j.home, workspacesDir, "_any"); !control && strings.TrimSpace(strings.Split(res.Stdout, "\n")[0]) != wantPwd {
				t.Errorf("pwd = %q, want the workspace %s", res.Stdout, wantPwd)
			}
		})
	}
}

// TestPromptShowsReach: the human asked about a run sees its reach in one
// line, with the secrets hidden and the layers that hold.
func TestPromptShowsReach(t *testing.T) {
	needABI(t, 4)
	j := newJailFixture(t, policy.SecurityAllowlist)
	ap := &answerPrompter{answer: policy.Reject}
	j.engine.Prompter = ap
	if _, err := j.store.Update(func(f *approvals.File) error { f.Defaults.Ask = string(policy.AskOnMiss); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := j.engine.Run(context.Background(), Request{RawCommand: "hello x", Cwd: j.repo}); err == nil {
		t.Fatal("a denied prompt ran")
	}
	got := ap.asked.Confinement
	if !strings.HasPrefix(got, "writes: cwd, tmp · network: none · sockets: none · hidden: ") ||
		!strings.Contains(got, "read-only inside: 2 persistence paths") || !strings.Contains(got, "layers: ") || !strings.Contains(got, "landlock") || !strings.Contains(got, "view") {
		t.Errorf("prompt's reach %q", got)
	}
}
