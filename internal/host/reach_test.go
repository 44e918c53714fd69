package host

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/policy"
)

// mkfiles creates each path beneath root ("/" ending: a directory).
func mkfiles(t *testing.T, root string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		full := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o700); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// jailFixture is an engine whose home holds secrets and start-up files
// and whose run cwd is a git repository beside it.
type jailFixture struct {
	*fixture
	home, repo string
	elsewhere  string // quietJailFixture's directory for a control's watches
}

func newJailFixture(t *testing.T, sec policy.Security) *jailFixture {
	f := newFixture(t, sec, policy.AskOff, policy.FallbackDeny, "$BIN/marker")
	j := &jailFixture{fixture: f}
	j.homeAndRepo(t, filepath.Dir(f.dir))
	return j
}

// homeAndRepo makes the fixture's home and repository in root and gives
// the engine that home.
func (j *jailFixture) homeAndRepo(t *testing.T, root string) {
	t.Helper()
	j.home, j.repo = filepath.Join(root, "home"), filepath.Join(root, "repo")
	mkfiles(t, j.home, ".ssh/id_ed25519", ".ssh/known_hosts", ".aws/credentials", ".netrc", ".bashrc", ".config/autostart/", "docs/readme")
	mkfiles(t, j.repo, ".git/hooks/", ".git/config", "main.go")
	j.engine.Home = j.home
}

func (j *jailFixture) setConfine(t *testing.T, c *approvals.Confine) {
	t.Helper()
	if _, err := j.store.Update(func(file *approvals.File) error { file.Defaults.Confine = c; return nil }); err != nil {
		t.Fatal(err)
	}
}

func (j *jailFixture) jailOf(t *testing.T, cwd string) *confine.Confinement {
	t.Helper()
	p, err := j.engine.Prepare(Request{RawCommand: "marker x", Cwd: cwd})
	if err != nil {
		t.Fatal(err)
	}
	return j.engine.confinement(p, "")
}

// only keeps the paths of ps beneath root (the machine's own secrets,
// /etc/shadow for a root host, are not the test's).
func only(ps []string, root string) []string {
	var out []string
	for _, p := range ps {
		if pathWithin(p, root) {
			out = append(out, p)
		}
	}
	return out
}

// TestJailFromPolicy computes the jail of a run from policy: the default
// hidden set (only what exists), readable opening a whole entry or one
// file inside a hidden directory, confine.hidden adding, sockets by their
// real path, the persistence paths inside the writable roots (the repo's
// hooks and config always, the home's when the home is writable), less
// writablePersistence, and security=full without a member hiding nothing.
func TestJailFromPolicy(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		sec                  policy.Security
		confine              *approvals.Confine
		hidden, ro, sockets  []string // relative to root; ro "repo/…" or "home/…"
		writesAll, unconfine bool
	}{
		{name: "allowlist default", sec: policy.SecurityAllowlist,
			hidden: []string{"home/.aws", "home/.netrc", "home/.ssh"},
			ro:     []string{"repo/.git/config", "repo/.git/hooks"}},
		{name: "readable whole and inside a hidden directory", sec: policy.SecurityAllowlist,
			confine: &approvals.Confine{Readable: []string{"~/.aws", "~/.ssh/known_hosts"}, Hidden: []string{"~/docs", "~/absent"}},
			hidden:  []string{"home/.netrc", "home/.ssh/id_ed25519", "home/docs"},
			ro:      []string{"repo/.git/config", "repo/.git/hooks"}},
		{name: "home writable: its start-up files stay read-only", sec: policy.SecurityAllowlist,
			confine: &approvals.Confine{Writable: []string{"~"}, WritablePersistence: []string{".git/hooks", "~/.zshrc"}, Sockets: []string{"$ROOT/link.sock"}},
			hidden:  []string{"home/.aws", "home/.netrc", "home/.ssh"},
			ro:      []string{"home/.bashrc", "home/.config/autostart", "home/.profile", "home/.ssh/authorized_keys", "home/.zshenv", "repo/.git/config"},
			sockets: []string{"real.sock"}},
		{name: "full asks for the jail", sec: policy.SecurityFull, confine: &approvals.Confine{},
			hidden: []string{"home/.aws", "home/.netrc", "home/.ssh"},
			ro:     []string{"repo/.git/config", "repo/.git/hooks"}},
		{name: "full without a member", sec: policy.SecurityFull, writesAll: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := newJailFixture(t, tc.sec)
			root := filepath.Dir(j.home)
			if c := tc.confine; c != nil {
				for i, s := range c.Sockets {
					c.Sockets[i] = strings.ReplaceAll(s, "$ROOT", root)
				}
				if err := os.Symlink(filepath.Join(root, "real.sock"), filepath.Join(root, "link.sock")); err != nil {
					t.Fatal(err)
				}
				j.setConfine(t, c)
			}
			c := j.jailOf(t, j.repo)
			abs := func(rel []string) []string {
				var out []string
				for _, r := range rel {
					out = append(out, filepath.Join(root, r))
				}
				return out
			}
			if d := cmp.Diff(abs(tc.hidden), only(c.Hidden, root)); d != "" {
				t.Errorf("hidden (-want +got):\n%s", d)
			}
			ro := only(c.ReadOnly, root)
			for _, w := range abs(tc.ro) {
				if !slices.Contains(ro, w) {
					t.Errorf("read-only lacks %s: %q", w, ro)
				}
			}
			for _, opened := range []string{"repo/.git/hooks", "home/.zshrc"} {
				if tc.confine != nil && len(tc.confine.WritablePersistence) > 0 && slices.Contains(ro, filepath.Join(root, opened)) {
					t.Errorf("writablePersistence did not open %s", opened)
				}
			}
			if len(tc.ro) == 0 && len(ro) > 0 || !slices.Contains(tc.ro, "home/.bashrc") && slices.Contains(ro, filepath.Join(root, "home/.bashrc")) {
				t.Errorf("read-only paths outside the writable roots: %q", ro)
			}
			if d := cmp.Diff(abs(tc.sockets), c.Sockets); d != "" {
				t.Errorf("sockets (-want +got):\n%s", d)
			}
			if got := slices.Contains(c.Writable, "/"); got != tc.writesAll {
				t.Errorf("writes anywhere = %v, want %v", got, tc.writesAll)
			}
			if err := c.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestJailWorktreeHooksPath: in a git worktree the hooks and config that
// run are the common directory's, and core.hooksPath moves the hooks.
func TestJailWorktreeHooksPath(t *testing.T) {
	j := newJailFixture(t, policy.SecurityAllowlist)
	root := filepath.Dir(j.home)
	main, wt := filepath.Join(root, "main"), filepath.Join(root, "wt")
	mkfiles(t, main, ".git/hooks/", ".git/worktrees/wt/", ".githooks/", "src/")
	if err := os.WriteFile(filepath.Join(main, ".git/config"), []byte("[core]\n\thooksPath = .githooks\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(main, ".git/worktrees/wt/commondir"), []byte("../..\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mkfiles(t, wt, "src/")
	if err := os.WriteFile(filepath.Join(wt, ".git"), []byte("gitdir: "+filepath.Join(main, ".git/worktrees/wt")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hooks, config := repoPersistence(filepath.Join(wt, "src"), nil)
	// core.hooksPath is relative to the worktree that runs the hook.
	if want := filepath.Join(wt, ".githooks"); hooks != want {
		t.Errorf("hooks = %s, want %s", hooks, want)
	}
	if want := filepath.Join(main, ".git/config"); config != want {
		t.Errorf("config = %s, want %s", config, want)
	}
	// A run in the main checkout keeps its .githooks read-only.
	c := j.jailOf(t, main)
	if !slices.Contains(c.ReadOnly, filepath.Join(main, ".githooks")) || slices.Contains(c.ReadOnly, filepath.Join(main, ".git/hooks")) {
		t.Errorf("read-only %q: want the hooksPath, not .git/hooks", c.ReadOnly)
	}
}

// TestReachLine: approvals check, prompts and the audit record show the
// run's reach in one line, the cwd as "cwd" and the run's temporary
// directory as "tmp", with the layers that hold.
func TestReachLine(t *testing.T) {
	j := newJailFixture(t, policy.SecurityAllowlist)
	p, err := j.engine.Prepare(Request{RawCommand: "marker x", Cwd: j.repo})
	if err != nil {
		t.Fatal(err)
	}
	j.engine.LandlockABI = func() int { return 7 }
	text := j.engine.ConfinementText(p)
	want := fmt.Sprintf("writes: cwd, tmp · network: none · sockets: none · hidden: %d secrets", len(j.engine.Jail(p).Hidden))
	if !strings.HasPrefix(text, want+" · read-only inside: 2 persistence paths · no access: "+j.engine.StateDir) {
		t.Errorf("reach line %q, want it to start %q", text, want)
	}
	if _, layers, _ := strings.Cut(text, " · layers: "); confine.Supported && !slices.Contains(strings.Split(layers, ", "), "landlock") {
		t.Errorf("reach line %q does not end with the layers that hold", text)
	}
	// A run's report is worked out once (Prepared.reach): the next run,
	// on a host without Landlock, gets its own.
	j.engine.LandlockABI = func() int { return 0 }
	if p, err = j.engine.Prepare(Request{RawCommand: "marker x", Cwd: j.repo}); err != nil {
		t.Fatal(err)
	}
	if text := j.engine.ConfinementText(p); !strings.Contains(text, " — refused on this host") || strings.Contains(text, "landlock, ") || strings.Contains(text, ", landlock") {
		t.Errorf("without Landlock: %q", text)
	}
}

// TestWorkspaceName never lets two agent ids share a workspace, nor one
// escape the workspaces directory.
func TestWorkspaceName(t *testing.T) {
	seen := map[string]string{}
	for _, id := range []string{"*", "", "dev", "Dev", "a.b", ".hidden", "..", "a/b", "a_b", "a_2fb", "_any", "ü", "a b"} {
		n := workspaceName(id)
		if n == "" || n == "." || n == ".." || strings.ContainsAny(n, "/\x00") || strings.HasPrefix(n, ".") {
			t.Errorf("%q → %q: not one safe name", id, n)
		}
		if prev, ok := seen[n]; ok && !(prev == "*" && id == "" || prev == "" && id == "*") {
			t.Errorf("%q and %q share the workspace %q", prev, id, n)
		}
		seen[n] = id
	}
}

// TestWorkspaceRefusals: a workspace that is a symbolic link, or that
// would sit inside the state directory, refuses the run (an invalid
// request naming the fix) rather than start it in ~ or through the link.
func TestWorkspaceRefusals(t *testing.T) {
	j := newJailFixture(t, policy.SecurityAllowlist)
	j.engine.Workspaces = filepath.Join(j.home, "ws")
	mkfiles(t, j.home, "elsewhere/")
	if err := os.MkdirAll(j.engine.Workspaces, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(j.home, "elsewhere"), filepath.Join(j.engine.Workspaces, "dev")); err != nil {
		t.Fatal(err)
	}
	_, err := j.engine.Prepare(Request{RawCommand: "marker x", AgentID: "dev"})
	var coded *bridge.CodedError
	if err == nil || !errors.As(err, &coded) || coded.Code != bridge.CodeInvalidRequest || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("linked workspace: %v", err)
	}
	j.engine.Workspaces = filepath.Join(j.engine.StateDir, "ws")
	if _, err := j.engine.Prepare(Request{RawCommand: "marker x", AgentID: "dev"}); err == nil || !strings.Contains(err.Error(), "inside the state directory") {
		t.Errorf("workspace in the state directory: %v", err)
	}
	if _, err := os.Stat(j.engine.Workspaces); err == nil {
		t.Error("a workspace was created inside the state directory")
	}
	// A cwd the request names inside the state directory is refused as
	// well: no run can reach it, so none starts there.
	_, err = j.engine.Prepare(Request{RawCommand: "marker x", AgentID: "dev", Cwd: j.engine.StateDir})
	if err == nil || !errors.As(err, &coded) || coded.Code != bridge.CodeInvalidRequest || !strings.Contains(err.Error(), "no run can reach") {
		t.Errorf("cwd in the state directory: %v", err)
	}
}

// TestJailHiddenWins: a cwd or writable root inside a hidden path is not
// granted: asking to work in ~/.aws does not open it.
func TestJailHiddenWins(t *testing.T) {
	j := newJailFixture(t, policy.SecurityAllowlist)
	j.setConfine(t, &approvals.Confine{Writable: []string{"~/.ssh"}})
	aws := filepath.Join(j.home, ".aws")
	c := j.jailOf(t, aws)
	if len(c.Writable) != 0 || !slices.Contains(c.Hidden, aws) || !slices.Contains(c.Hidden, filepath.Join(j.home, ".ssh")) {
		t.Errorf("writable %q, hidden %q: want nothing writable, both hidden", c.Writable, c.Hidden)
	}
}

// BenchmarkJailPolicy measures computing a run's jail from policy, which
// every confined run pays once: kept while nothing it was worked out from
// changed (jail, what runs get: the home's part and the cwd's part, with
// the run's temporary directory added), and worked out afresh
// (jail-uncached: every look-up, as before they were kept); beside the
// floor it is added to, a bare spawn of /bin/true, in the same benchmark.
func BenchmarkJailPolicy(b *testing.B) {
	for _, uncached := range []bool{false, true} {
		name := map[bool]string{false: "jail", true: "jail-uncached"}[uncached]
		b.Run(name, func(b *testing.B) { benchJailPolicy(b, uncached) })
	}
	b.Run("floor-spawn-true", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchJailPolicy(b *testing.B, uncached bool) {
	f := newFixture(b, policy.SecurityAllowlist, policy.AskOff, policy.FallbackDeny, "$BIN/marker")
	root := filepath.Dir(f.dir)
	home, repo := filepath.Join(root, "home"), filepath.Join(root, "repo", "a", "b")
	for _, d := range []string{filepath.Join(home, ".ssh"), filepath.Join(home, ".aws"), filepath.Join(root, "repo", ".git", "hooks"), repo} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			b.Fatal(err)
		}
	}
	f.engine.Home = home
	p, err := f.engine.Prepare(Request{RawCommand: "marker x", Cwd: repo})
	if err != nil {
		b.Fatal(err)
	}
	f.engine.NoCache = uncached
	for b.Loop() {
		p.jail = nil
		_ = f.engine.confinement(p, "/tmp/x")
	}
}

// TestRealPath resolves links along the way and at the end (a link to a
// socket not made yet is followed), keeps a missing tail beneath its real
// parent, and ends on a loop of links.
func TestRealPath(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	mkfiles(t, real, "sub/")
	for link, target := range map[string]string{"via": "real", "sock": "real/sub/agent.sock", "a": "b", "b": "a"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	for in, want := range map[string]string{
		"via/sub":         "real/sub",
		"via/sub/missing": "real/sub/missing",
		"sock":            "real/sub/agent.sock",
		"via/no/such":     "real/no/such",
	} {
		if got := realPath(filepath.Join(dir, in)); got != filepath.Join(dir, want) {
			t.Errorf("realPath(%s) = %s, want %s", in, got, filepath.Join(dir, want))
		}
	}
	if got := realPath(filepath.Join(dir, "a", "x")); !strings.HasPrefix(got, dir) {
		t.Errorf("a loop resolved to %s", got)
	}
}
