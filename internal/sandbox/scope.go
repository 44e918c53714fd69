package sandbox

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/exechost/exechost/internal/hint"
)

// ErrBadAgentID is returned for an agent id that cannot name a workspace
// directory safely (empty, a dot name, or with characters outside
// [A-Za-z0-9._-]).
var ErrBadAgentID = errors.New("invalid agent id for a sandbox workspace")

// ScopeKey returns the identity of the sandbox req runs in under scope:
// requests with the same key share a container and its /tmp.
// Runs of different egress policies (Egress.Key) never share one: the
// sandbox's network is fixed when it starts, and a run there could read
// another's proxy credentials.
func ScopeKey(scope Scope, req Request) string {
	var key string
	switch scope {
	case ScopeShared:
		key = "shared"
	case ScopeAgent:
		key = "agent\x00" + req.AgentID
	default:
		key = "session\x00" + req.AgentID + "\x00" + req.SessionKey
	}
	if req.Egress != nil {
		key += "\x00egress\x00" + req.Egress.Key
	}
	return key
}

// WorkspaceRoot returns the directory holding the workspaces: cfg.Workspace,
// or <stateDir>/sandboxes.
func WorkspaceRoot(cfg Config, stateDir string) string {
	if cfg.Workspace != "" {
		return cfg.Workspace
	}
	return filepath.Join(stateDir, "sandboxes")
}

// WorkspaceName returns the directory name (under WorkspaceRoot) of the
// workspace req uses under scope: the agent id, or SharedWorkspace. It fails
// closed on agent ids that could escape the root.
func WorkspaceName(scope Scope, agentID string) (string, error) {
	if scope == ScopeShared {
		return SharedWorkspace, nil
	}
	if err := checkAgentID(agentID); err != nil {
		return "", err
	}
	return agentID, nil
}

func checkAgentID(id string) error {
	if id == "" {
		return hint.Wrap(fmt.Errorf("%w: empty", ErrBadAgentID), "every sandbox request needs an agentId")
	}
	if id[0] == '.' || len(id) > 128 {
		return fmt.Errorf("%w: %q", ErrBadAgentID, id)
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok {
			return fmt.Errorf("%w: %q (allowed: letters, digits, '.', '-', '_')", ErrBadAgentID, id)
		}
	}
	return nil
}

// WorkspaceOwner is who writes a workspace inside the sandbox, as the
// backend knows it (EnsureWorkspace).
type WorkspaceOwner struct {
	// User is the sandbox's "uid:gid" (or a name its image knows); empty
	// means DefaultUser.
	User string
	// Mapped says the sandbox user maps to a host uid that only "other"
	// permission bits reach (rootless Docker).
	Mapped bool
}

// EnsureWorkspace creates the workspace directory for req and returns its
// host path, mode 0700: no other host user may read or plant files in an
// agent's workspace, wherever sandbox.workspace puts it. The sandbox user
// (owner.User, default 65534) must be able to write it, so when running as
// root the directory is owned by that user (when numeric, "uid:gid");
// otherwise it is ours, which the bwrap backend maps to the sandbox user
// inside its user namespace. A sandbox user that maps elsewhere
// (owner.Mapped: rootless Docker) gets 0777 under the default root only,
// inside the 0700 state directory (docs/sandbox.md). A workspace an older
// version created 0777 is tightened on its next use.
func EnsureWorkspace(cfg Config, stateDir string, req Request, owner WorkspaceOwner) (string, error) {
	name, err := WorkspaceName(cfg.Scope, req.AgentID)
	if err != nil {
		return "", err
	}
	root := WorkspaceRoot(cfg, stateDir)
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", fmt.Errorf("create sandbox workspace root %s: %w", root, err)
	}
	dir := filepath.Join(root, name)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("create sandbox workspace %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("stat sandbox workspace %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("sandbox workspace %s: not a directory (is it a symlink?)", dir)
	}
	user := cmp.Or(owner.User, DefaultUser)
	if uid, gid, ok := numericUser(user); ok && os.Geteuid() == 0 {
		if err := os.Lchown(dir, uid, gid); err != nil {
			return "", fmt.Errorf("chown sandbox workspace %s to the sandbox user %s: %w", dir, user, err)
		}
	}
	mode := os.FileMode(0o700)
	if owner.Mapped && cfg.Workspace == "" {
		// Rootless Docker's container user maps to a subordinate uid that
		// only "other" bits reach; the default root sits in the 0700
		// state directory, which no other host user can enter.
		mode = 0o777
	}
	if fi.Mode().Perm() != mode {
		if err := os.Chmod(dir, mode); err != nil {
			return "", fmt.Errorf("chmod sandbox workspace %s: %w", dir, err)
		}
	}
	return dir, nil
}

// numericUser parses a "uid:gid" sandbox user; a name the image knows is
// not numeric and leaves the workspace's owner alone.
func numericUser(u string) (uid, gid int, ok bool) {
	a, b, found := strings.Cut(u, ":")
	if !found {
		b = a
	}
	uid, err1 := strconv.Atoi(a)
	gid, err2 := strconv.Atoi(b)
	return uid, gid, err1 == nil && err2 == nil && uid >= 0 && gid >= 0
}

// ContainerCwd resolves a request's cwd inside the sandbox: empty means the
// workspace, relative paths are relative to it.
func ContainerCwd(cwd string) string {
	switch {
	case cwd == "":
		return WorkspaceDir
	case filepath.IsAbs(cwd):
		return filepath.Clean(cwd)
	default:
		return filepath.Join(WorkspaceDir, cwd)
	}
}

// EnvList turns an env overlay into sorted NAME=value pairs, refusing names
// that a process environment cannot hold.
func EnvList(env map[string]string) ([]string, error) {
	out := make([]string, 0, len(env))
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsAny(v, "\x00") {
			return nil, fmt.Errorf("invalid environment variable %q", k)
		}
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out, nil
}
