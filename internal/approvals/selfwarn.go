package approvals

import (
	"fmt"
	"path"
	"strings"

	"github.com/exechost/exechost/internal/policy"
)

// Warnings `approvals get` gives about entries an agent can defeat from
// inside its own runs (pitfalls: the allowlist names a file, and a run may
// be able to write that file).

// selfWritableWarning says when pattern covers a path that the agent's own
// runs may write: beneath its extra writable roots (confine.writable), or
// in the home directory (~/bin, ~/.local/bin, a checkout): a run whose cwd
// holds it can replace the file, or plant a symlink there, which is then
// decided on by its name and run. "" when neither holds.
func selfWritableWarning(pattern, home string, rc *ResolvedConfine) string {
	p := policy.ExpandHome(strings.TrimSpace(pattern), home)
	if !strings.HasPrefix(p, "/") {
		return ""
	}
	dir := literalDir(path.Clean(p))
	if rc != nil {
		for _, w := range rc.Writable {
			if within(dir, w) {
				return fmt.Sprintf("pattern %q lies inside %s, a writable root of this agent's runs (confine.writable): a run can replace the file or put a symlink there and have it allowed; allowlist a copy in a directory runs cannot write, e.g. /usr/local/bin", pattern, w)
			}
		}
	}
	if home != "" && home != "/" && within(dir, home) {
		return fmt.Sprintf("pattern %q lies inside the home directory %s: a run whose cwd holds it (or any process of this user) can replace the file or put a symlink there and have it allowed; allowlist a copy in a directory runs cannot write, e.g. /usr/local/bin", pattern, home)
	}
	return ""
}

// within reports whether dir is root or beneath it.
func within(dir, root string) bool {
	root = path.Clean(root)
	return dir == root || strings.HasPrefix(dir, strings.TrimSuffix(root, "/")+"/")
}

// refusedEnvSamples are names policy.RefusedEnv refuses, to show which
// refused names a prefix entry covers. Only those RefusedEnv still
// refuses are named, so the list cannot claim more than the policy does.
var refusedEnvSamples = []string{
	"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_INSERT_LIBRARIES", "GIT_DIR", "GIT_SSH_COMMAND",
	"GIT_EXEC_PATH", "GIT_CONFIG_GLOBAL", "BASH_ENV", "BASHOPTS", "PATH", "PAGER", "PERL5OPT", "PERL5LIB",
	"PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "RUBYOPT", "RUBYLIB", "NODE_OPTIONS", "NODE_PATH",
	"NPM_CONFIG_PREFIX", "PIP_INDEX_URL", "GEM_HOME", "BUNDLE_GEMFILE", "LUA_PATH", "JAVA_TOOL_OPTIONS",
	"HOME", "EDITOR", "VISUAL", "SSH_ASKPASS", "SUDO_ASKPASS", "LESSOPEN", "OPENSSL_CONF", "XDG_CONFIG_HOME",
	"IFS", "ENV", "CDPATH", "PROMPT_COMMAND", "PS4", "ZDOTDIR", "INPUTRC", "CLASSPATH", "GCONV_PATH",
}

// envPrefixWarning says when an envAllowlist prefix entry ("GIT_*")
// covers names that are refused whatever the allowlist says: the entry
// looks like it permits them, and they stay refused at run time. "" for
// an exact name (LintEnvPattern reports a refused one) or a prefix that
// covers none.
func envPrefixWarning(entry string) string {
	prefix, ok := strings.CutSuffix(entry, "*")
	if !ok || prefix == "" {
		return ""
	}
	var covered []string
	for _, n := range refusedEnvSamples {
		if strings.HasPrefix(n, prefix) && policy.RefusedEnv(n) {
			covered = append(covered, n)
		}
	}
	if policy.RefusedEnv(prefix+"EXECHOST_PROBE") && policy.RefusedEnv(prefix+"A") {
		return fmt.Sprintf("env entry %q covers only names that can change what runs (%s): they are refused whatever the allowlist says, so it permits nothing; list the names you need exactly", entry, sample(covered, prefix))
	}
	if len(covered) == 0 {
		return ""
	}
	return fmt.Sprintf("env entry %q also covers names that can change what runs (%s): those stay refused whatever the allowlist says; list the names you need exactly", entry, sample(covered, prefix))
}

// sample names up to four of names, or the prefix's family.
func sample(names []string, prefix string) string {
	if len(names) == 0 {
		return prefix + "…"
	}
	if len(names) > 4 {
		return strings.Join(names[:4], ", ") + ", …"
	}
	return strings.Join(names, ", ")
}
