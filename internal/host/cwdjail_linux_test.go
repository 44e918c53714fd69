package host

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/policy"
)

// cwdWorked is how many times the engine has worked out a cwd's jail.
func (j *jailFixture) cwdWorked() int { return j.engine.cwdJails.workedOut() }

// cwdKept runs fn until the kept jail of a cwd is handed out (keptBy).
func (j *jailFixture) cwdKept(fn func()) bool { return keptBy(j.cwdWorked, fn) }

// appendFile appends text to the file at path in place (no rename: what
// an editor that writes in place, or `git config`'s fallback, does).
func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// TestCwdJailFollowsTheCwd: a run's jail, kept between runs in one cwd,
// follows every change to what it was worked out from — a repository made
// in the cwd, core.hooksPath written into its config in place, the cwd's
// path turned into a link elsewhere, a confine member that changes — and
// is not worked out again while nothing changed.
func TestCwdJailFollowsTheCwd(t *testing.T) {
	j := quietJailFixture(t, policy.SecurityAllowlist)
	t.Setenv("TMPDIR", t.TempDir())
	root := filepath.Dir(j.repo)
	proj := filepath.Join(root, "proj")
	mkfiles(t, proj, "main.go")
	readOnly := func() []string { return only(j.jailOf(t, proj).ReadOnly, root) }

	if ro := readOnly(); len(ro) != 0 {
		t.Fatalf("no repository yet: read-only %q", ro)
	}
	if !j.cwdKept(func() { readOnly() }) {
		t.Fatal("unchanged cwd: its jail was worked out again each time")
	}

	for _, step := range []struct {
		name   string
		change func()
		want   string // now read-only, beneath proj
	}{
		{"a repository made in the cwd", func() { mkfiles(t, proj, ".git/hooks/", ".git/config") }, ".git/hooks"},
		{"core.hooksPath written in place", func() {
			appendFile(t, filepath.Join(proj, ".git", "config"), "\n[core]\n\thooksPath = tools/hooks\n")
		}, "tools/hooks"},
	} {
		readOnly() // kept from here on
		before := j.cwdWorked()
		step.change()
		if got := readOnly(); !slices.Contains(got, filepath.Join(proj, step.want)) {
			t.Errorf("%s: read-only %q lacks %s", step.name, got, step.want)
		}
		if j.cwdWorked() == before {
			t.Errorf("%s: the kept jail was handed out after a change", step.name)
		}
	}

	// The cwd's path now leads elsewhere: that is the writable root.
	elsewhere := filepath.Join(root, "elsewhere")
	mkfiles(t, elsewhere, "x")
	if err := os.Rename(proj, filepath.Join(root, "proj.old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, proj); err != nil {
		t.Fatal(err)
	}
	c := j.jailOf(t, proj)
	if !slices.Contains(c.Writable, elsewhere) || slices.ContainsFunc(c.Writable, func(w string) bool { return pathWithin(w, filepath.Join(root, "proj.old")) }) {
		t.Errorf("cwd turned into a link: writable %q, want %s", c.Writable, elsewhere)
	}
	if ro := only(c.ReadOnly, root); len(ro) != 0 {
		t.Errorf("cwd turned into a link to no repository: read-only %q", ro)
	}

	// Another confine member is another jail.
	extra := filepath.Join(root, "extra")
	mkfiles(t, extra, "y")
	j.setConfine(t, &approvals.Confine{Writable: []string{extra}})
	if w := j.jailOf(t, proj).Writable; !slices.Contains(w, extra) {
		t.Errorf("confine.writable added: writable %q lacks %s", w, extra)
	}
}

// TestCwdJailChangesNothing: the kept jail is the jail worked out afresh
// (NoCache), whatever the cwd and confine member, run after run.
func TestCwdJailChangesNothing(t *testing.T) {
	j := newJailFixture(t, policy.SecurityAllowlist)
	t.Setenv("TMPDIR", t.TempDir())
	fresh := NewEngine(j.engine.StateDir, policy.HostGateway, "gw")
	fresh.PATH, fresh.Home, fresh.NoCache = j.engine.PATH, j.engine.Home, true
	worktree := filepath.Join(filepath.Dir(j.repo), "wt")
	mkfiles(t, worktree, "a")
	if err := os.WriteFile(filepath.Join(worktree, ".git"), []byte("gitdir: "+filepath.Join(j.repo, ".git")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, conf := range []*approvals.Confine{nil, {Writable: []string{worktree}, WritablePersistence: []string{approvals.RepoConfig}}} {
		j.setConfine(t, conf)
		for _, cwd := range []string{j.repo, worktree, filepath.Dir(j.repo)} {
			p, err := fresh.Prepare(Request{RawCommand: "marker x", Cwd: cwd})
			if err != nil {
				t.Fatal(err)
			}
			want := fresh.confinement(p, "")
			for i := range 3 {
				if diff := cmp.Diff(want, j.jailOf(t, cwd), cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("cwd %s, confine %+v, pass %d (-afresh +kept):\n%s", cwd, conf, i+1, diff)
				}
			}
		}
	}
}

// TestNewHooksPathReadOnlyToTheNextRun runs the attack for real: after
// runs were confined in a repository, its owner points core.hooksPath at
// a directory inside the cwd (an in-place edit of .git/config); the next
// run may not plant a hook there, while it still writes beside it. The
// control keeps the earlier jail vouched for by watches on an unrelated
// directory: the same run plants the hook, so what stops it is that the
// kept jail is worked out again when the config changes.
func TestNewHooksPathReadOnlyToTheNextRun(t *testing.T) {
	needABI(t, 4)
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "watched", true: "control: watches elsewhere"}[control], func(t *testing.T) {
			j, work := quietJail(t, ".git/hooks/", ".git/config", "ci/hooks/", "main.go")
			run := func(text string) (string, error) {
				t.Helper()
				res, err := j.engine.Run(context.Background(), Request{RawCommand: text, Cwd: work})
				return res.Stdout + res.Stderr, err
			}
			if out, err := run("echo x > " + filepath.Join(work, ".git", "hooks", "pre-commit") + " || echo refused"); err != nil || !containsLine(out, "refused") {
				t.Fatalf("the first run planted a hook in .git/hooks: %q, %v", out, err)
			}
			if !j.cwdKept(func() { _, _ = run("true") }) {
				t.Fatal("every run worked its jail out again: nothing is kept")
			}
			if control {
				watchElsewhere(t, &j.engine.cwdJails, j.engine.watcher(), j.elsewhere)
			}
			appendFile(t, filepath.Join(work, ".git", "config"), "\n[core]\n\thooksPath = ci/hooks\n")
			hook := filepath.Join(work, "ci", "hooks", "pre-commit")
			out, err := run("echo evil > " + hook + " || echo refused; echo ok > " + filepath.Join(work, "beside"))
			if err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(work, "beside")); err != nil || string(b) != "ok\n" {
				t.Fatalf("the run cannot write in its cwd: %q, %v (output %q)", b, err, out)
			}
			_, statErr := os.Stat(hook)
			if planted := statErr == nil; planted != control {
				t.Errorf("the run planted a hook in the new hooks path = %v, want %v (output %q)", planted, control, out)
			}
		})
	}
}

// containsLine reports whether out has line as one of its lines.
func containsLine(out, line string) bool {
	return slices.Contains(strings.Split(strings.TrimRight(out, "\n"), "\n"), line)
}

// TestCwdJailManyCwds: runs in more cwds than are kept cost one working-out
// each, as without keeping (a cwd seen once is not watched), and what is
// kept stays bounded.
func TestCwdJailManyCwds(t *testing.T) {
	j := newJailFixture(t, policy.SecurityAllowlist)
	t.Setenv("TMPDIR", t.TempDir())
	root := filepath.Join(filepath.Dir(j.repo), "many")
	n := maxMemos + 36
	for i := range n {
		mkfiles(t, filepath.Join(root, strconv.Itoa(i)), "f")
	}
	before := j.cwdWorked()
	for i := range n {
		j.jailOf(t, filepath.Join(root, strconv.Itoa(i)))
	}
	if got := j.cwdWorked() - before; got != n {
		t.Errorf("%d cwds seen once: worked out %d times, want %d", n, got, n)
	}
	j.engine.cwdJails.mu.Lock()
	kept := len(j.engine.cwdJails.m)
	j.engine.cwdJails.mu.Unlock()
	if kept > maxMemos {
		t.Errorf("%d jails kept, at most %d", kept, maxMemos)
	}
}
