package host

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/hint"
)

// workspacesDir is where the per-agent workspaces live beneath the host
// user's home when Engine.Workspaces is empty: outside the state directory
// (which no run may reach) and outside every path of the default hidden
// and persistence sets.
const workspacesDir = ".local/share/exechost/workspaces"

// workspaces is the directory holding the per-agent workspaces.
func (e *Engine) workspaces() string {
	if e.Workspaces != "" {
		return e.Workspaces
	}
	return filepath.Join(e.Home, workspacesDir)
}

// workspaceName is an agent's workspace directory name: the id itself when
// it is made of letters, digits, '-' and '.' (and does not start with a
// '.'), otherwise with every other byte (and '_') written as _XX in hex, so
// that two ids never share a workspace; "*" (a request naming no agent)
// is "_any", which no escaped id can be.
func workspaceName(agent string) string {
	if agent == "*" || agent == "" {
		return "_any"
	}
	var b strings.Builder
	for i := 0; i < len(agent); i++ {
		c := agent[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' && i > 0
		if ok {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "_%02x", c)
		}
	}
	return b.String()
}

// workspace returns the agent's workspace, the cwd of a run that names
// none, creating it (0700, and its parents) when missing. It refuses one
// that is not a directory of this user's (a symbolic link, another user's
// directory), or that lies inside the state directory, which no run may
// reach: such a run is refused rather than started in ~.
func (e *Engine) workspace(agent string) (string, error) {
	root := e.workspaces()
	if !filepath.IsAbs(root) {
		return "", fmt.Errorf("workspaces directory %q is not absolute (no home directory?)", root)
	}
	dir := filepath.Join(root, workspaceName(agent))
	if pathWithin(dir, e.StateDir) {
		return "", hint.Wrap(fmt.Errorf("agent workspace %s is inside the state directory %s, which no run may reach", dir, e.StateDir), "keep the state directory and the workspaces apart")
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("agent workspace: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("agent workspace: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("agent workspace: %w", err)
	}
	if !fi.IsDir() {
		return "", hint.Wrap(fmt.Errorf("agent workspace %s is not a directory (%s)", dir, fi.Mode().Type()), "remove it; exechost creates the directory itself")
	}
	if uid, ok := ownerOf(fi); ok && uid != os.Getuid() {
		return "", hint.Wrap(fmt.Errorf("agent workspace %s belongs to uid %d", dir, uid), "remove it; exechost creates the directory itself")
	}
	return dir, nil
}

// defaultCwd is the cwd of a request that names none: the agent's
// workspace, never the home directory.
func (e *Engine) defaultCwd(agent string) (string, error) {
	dir, err := e.workspace(agent)
	if err != nil {
		return "", bridge.InvalidRequest(hint.Wrap(err, "pass a cwd"))
	}
	return dir, nil
}

// pathWithin reports whether p is root or beneath it (both clean, absolute).
func pathWithin(p, root string) bool {
	p, root = filepath.Clean(p), filepath.Clean(root)
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}

// realPath is p with its symbolic links resolved, as far as it exists: a
// missing tail is kept as written beneath its real parent, and a link to
// a missing path (a socket not made yet) is followed to where it points.
func realPath(p string) string {
	return newResolver().real(p)
}

// realCwd is p's cwd's real path, looked up once.
func (p *Prepared) realCwd() string {
	if p.cwdReal == "" {
		p.cwdReal = realPath(p.Cwd)
	}
	return p.cwdReal
}

// resolver resolves paths as realPath does, remembering each path it has
// resolved, so that the many paths of one jail beneath the same few
// directories (~, ~/.config, ~/.ssh) cost one lstat(2) per distinct path
// component, not one per component of each path.
type resolver struct {
	memo   map[string]string
	exists map[string]bool // by real path: lstat(2) found it
	links  int             // symbolic links followed, bounded as the kernel bounds them
	rec    *lookups        // records each path looked up; nil: none
}

func newResolver() *resolver {
	return &resolver{memo: map[string]string{}, exists: map[string]bool{"/": true}}
}

// maxLinks bounds the symbolic links one resolver follows (the kernel's
// own bound is 40 per lookup): past it a link is kept as the link.
const maxLinks = 40

func (r *resolver) real(p string) string {
	p = filepath.Clean(p)
	if !filepath.IsAbs(p) {
		return p
	}
	if v, ok := r.memo[p]; ok {
		return v
	}
	out := p
	if d := filepath.Dir(p); d != p {
		rd := r.real(d)
		q := filepath.Join(rd, filepath.Base(p))
		out = q
		// Beneath a missing directory nothing exists: not looked up.
		if fi, err := r.lstat(rd, q); err == nil {
			r.exists[q] = true
			if fi.Mode()&fs.ModeSymlink != 0 && r.links < maxLinks {
				if t, err := os.Readlink(q); err == nil {
					r.links++
					if !filepath.IsAbs(t) {
						t = filepath.Join(rd, t)
					}
					out = r.real(t)
				}
			}
		}
	}
	r.memo[p] = out
	return out
}

// lstat is os.Lstat of q, the entry of the real directory rd, without a
// system call when rd does not exist.
func (r *resolver) lstat(rd, q string) (fs.FileInfo, error) {
	if !r.exists[rd] {
		return nil, fs.ErrNotExist
	}
	r.rec.lookedUp(q)
	return os.Lstat(q)
}

// has reports whether p exists (resolving it first).
func (r *resolver) has(p string) bool {
	return r.exists[r.real(p)]
}

// hidden computes a run's hidden set: every entry of the default hidden
// set that exists (patterns expanded), less what confine.readable (opened)
// opens — an entry named whole is dropped; a directory holding a readable
// path is hidden entry by entry except that path — plus confine.hidden's
// (extra) existing paths. Each is given as its real path (a link's target
// is what holds the secret), sorted, without duplicates.
func (e *Engine) hidden(res *resolver, opened, extra []string) []string {
	var readable []string
	for _, r := range opened {
		readable = append(readable, res.real(r))
	}
	var out []string
	add := func(p string) {
		if !res.has(p) {
			return
		}
		if p = res.real(p); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, entry := range approvals.DefaultHidden(e.Home) {
		paths := []string{entry}
		if strings.ContainsAny(entry, "*?[") {
			res.rec.globbed(entry)
			paths, _ = filepath.Glob(entry)
		}
		for _, p := range paths {
			for _, q := range carve(res.real(p), readable, res.rec) {
				add(q)
			}
		}
	}
	for _, p := range extra {
		add(p)
	}
	slices.Sort(out)
	return out
}

// carve returns what hides p with the readable paths left visible: p
// itself when none is at or beneath it, nothing when one names p or an
// ancestor, and otherwise p's entries, each carved the same way (each
// directory listed is recorded in rec).
func carve(p string, readable []string, rec *lookups) []string {
	var inside bool
	for _, r := range readable {
		if pathWithin(p, r) {
			return nil
		}
		if pathWithin(r, p) {
			inside = true
		}
	}
	if !inside {
		return []string{p}
	}
	rec.listed(p)
	ents, err := os.ReadDir(p)
	if err != nil {
		return []string{p} // cannot be listed: hidden whole (fail closed)
	}
	var out []string
	for _, ent := range ents {
		out = append(out, carve(filepath.Join(p, ent.Name()), readable, rec)...)
	}
	return out
}

// readOnly computes a run's persistence paths that lie inside its
// writable roots: the home's (home: homeReach.persist, resolved) and its
// repository's (the hooks directory, or core.hooksPath, and the config of
// the repository holding cwd), less confine.writablePersistence. A path
// that does not exist yet is listed too, so that it cannot be created (a
// missing ~/.zshrc is as good a place to plant code as an existing one).
func (e *Engine) readOnly(res *resolver, cwd string, writable []string, asked *approvals.ResolvedConfine, home []persistent) []string {
	var open []string
	if asked != nil {
		open = asked.WritablePersistence
	}
	var cands []string // real paths
	for _, p := range home {
		if !slices.Contains(open, p.name) {
			cands = append(cands, p.real)
		}
	}
	hooks, config := repoPersistence(cwd, res.rec)
	for _, rp := range []struct{ name, path string }{{approvals.RepoHooks, hooks}, {approvals.RepoConfig, config}} {
		if rp.path != "" && !slices.Contains(open, rp.name) && !slices.Contains(open, rp.path) {
			cands = append(cands, res.real(rp.path))
		}
	}
	var out []string
	for _, p := range cands {
		for _, w := range writable {
			if filepath.IsAbs(w) && pathWithin(p, w) && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// repoPersistence finds the git repository holding dir (a .git directory,
// or a .git file naming the git directory of a worktree) and returns its
// hooks directory (core.hooksPath when its config sets one) and its
// config file; "" for both outside a repository. rec (nil: none) records
// what it reads.
func repoPersistence(dir string, rec *lookups) (hooks, config string) {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		dotgit := filepath.Join(d, ".git")
		rec.lookedUp(dotgit)
		fi, err := os.Stat(dotgit)
		if err == nil {
			gitdir := dotgit
			if !fi.IsDir() {
				rec.read(dotgit)
				if gitdir = gitFile(dotgit); gitdir == "" {
					return "", ""
				}
			}
			common := gitdir
			rec.read(filepath.Join(gitdir, "commondir"))
			if b, err := os.ReadFile(filepath.Join(gitdir, "commondir")); err == nil {
				c := strings.TrimSpace(string(b))
				if !filepath.IsAbs(c) {
					c = filepath.Join(gitdir, c)
				}
				common = filepath.Clean(c)
			}
			config = filepath.Join(common, "config")
			hooks = filepath.Join(common, "hooks")
			rec.read(config)
			if hp := hooksPath(config); hp != "" {
				if !filepath.IsAbs(hp) {
					hp = filepath.Join(d, hp)
				}
				hooks = filepath.Clean(hp)
			}
			return hooks, config
		}
		if d == "/" || d == "." {
			return "", ""
		}
	}
}

// gitFile reads a .git file's "gitdir: PATH" (relative to its directory).
func gitFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	g, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return ""
	}
	g = strings.TrimSpace(g)
	if !filepath.IsAbs(g) {
		g = filepath.Join(filepath.Dir(path), g)
	}
	return filepath.Clean(g)
}

// hooksPath is core.hooksPath from a git config file ("" when unset):
// hooks run from there, so it is what must stay read-only.
func hooksPath(config string) string {
	f, err := os.Open(config)
	if err != nil {
		return ""
	}
	defer f.Close()
	var section, path string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			section = strings.ToLower(strings.Trim(strings.Fields(strings.Trim(line, "[]") + " x")[0], "\""))
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok && section == "core" && strings.EqualFold(strings.TrimSpace(k), "hooksPath") {
			path = strings.Trim(strings.TrimSpace(v), "\"")
		}
	}
	return path
}
