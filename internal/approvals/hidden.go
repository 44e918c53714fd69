package approvals

import (
	"path/filepath"

	"github.com/exechost/exechost/internal/policy"
)

// defaultHidden is the default hidden set: secrets a confined run never
// sees unless confine.readable opens them (docs/approvals-file.md,
// "confine"). "~/" is the host user's home; a "*" matches within one
// name (filepath.Match), expanded when a run's confinement is computed.
// Whole directories where the directory holds little else (~/.ssh: keys
// under any name, and its config can run a ProxyCommand); single files
// where the directory holds ordinary settings (~/.docker/config.json).
var defaultHidden = []string{
	// ssh and gpg keys, password stores and keyrings
	"~/.ssh",
	"~/.gnupg",
	"~/.password-store",
	"~/.local/share/keyrings",
	"~/.config/op",
	// cloud and cluster credentials
	"~/.aws",
	"~/.config/gcloud",
	"~/.azure",
	"~/.oci",
	"~/.config/doctl",
	"~/.kube",
	"~/.docker/config.json",
	"~/.config/containers/auth.json",
	"~/.terraform.d/credentials.tfrc.json",
	"~/.vault-token",
	"~/.s3cfg",
	"~/.config/rclone/rclone.conf",
	// tokens of hosts, registries and forges
	"~/.netrc",
	"~/.git-credentials",
	"~/.config/git/credentials",
	"~/.config/gh/hosts.yml",
	"~/.config/hub",
	"~/.npmrc",
	"~/.pypirc",
	"~/.cargo/credentials",
	"~/.cargo/credentials.toml",
	"~/.gem/credentials",
	"~/.pgpass",
	"~/.my.cnf",
	// browser and mail profiles (cookies, saved passwords)
	"~/.mozilla",
	"~/.thunderbird",
	"~/.config/google-chrome",
	"~/.config/chromium",
	"~/.config/BraveSoftware",
	"~/.config/microsoft-edge",
	"~/.config/vivaldi",
	"~/.config/opera",
	// the machine's own secrets, readable to a host running as root
	"/etc/shadow",
	"/etc/gshadow",
	"/etc/ssh/ssh_host_*_key",
}

// DefaultHidden returns the default hidden set with "~/" expanded to home
// (entries with "*" kept as patterns), a fresh slice each call.
func DefaultHidden(home string) []string {
	return expandAll(defaultHidden, home)
}

// persistence are the paths a run could plant code in for the user's next
// login, shell, editor or git command: they stay read-only even inside a
// writable root unless confine.writablePersistence names them. RepoHooks
// and RepoConfig (the run's repository's) are added per run.
var persistence = []string{
	// shells
	"~/.profile",
	"~/.bashrc",
	"~/.bash_profile",
	"~/.bash_login",
	"~/.bash_logout",
	"~/.zshenv",
	"~/.zshrc",
	"~/.zprofile",
	"~/.zlogin",
	"~/.zlogout",
	"~/.config/fish",
	"~/.pam_environment",
	"~/.config/environment.d",
	// sessions and services started at login
	"~/.config/autostart",
	"~/.config/systemd/user",
	"~/.local/share/systemd/user",
	"~/.xprofile",
	"~/.xsession",
	"~/.xsessionrc",
	"~/.xinitrc",
	// ssh's own (inside ~/.ssh when readable opens it)
	"~/.ssh/authorized_keys",
	"~/.ssh/authorized_keys2",
	"~/.ssh/rc",
	"~/.ssh/environment",
	"~/.ssh/config",
	// configuration that runs programs (git's core.fsmonitor, core.pager,
	// editors' start-up files)
	"~/.gitconfig",
	"~/.config/git/config",
	"~/.vimrc",
	"~/.config/nvim",
	"~/.emacs",
	"~/.emacs.d",
}

// Persistence returns the home persistence paths with "~/" expanded to
// home, a fresh slice each call.
func Persistence(home string) []string {
	return expandAll(persistence, home)
}

func expandAll(ps []string, home string) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		if q := policy.ExpandHome(p, home); filepath.IsAbs(q) {
			out = append(out, filepath.Clean(q))
		}
	}
	return out
}
