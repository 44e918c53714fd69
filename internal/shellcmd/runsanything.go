package shellcmd

import (
	"path"
	"strings"
)

// runsAnything lists programs that are not shells or interpreters but whose
// arguments (or files they read) can make them run any other program or
// write any file: allowlisting one by path allows all of that (pitfalls:
// "argument semantics of safe programs", "interpreters and package
// managers"). The UIs flag them before a human says allow-always. It is
// the one list of them; shells, interpreters, wrappers, carriers and
// privilege changers are classified by classify and flagged too.
var runsAnything = map[string]string{
	"find":        "-exec/-execdir/-ok run any command",
	"xargs":       "runs any command it is given",
	"git":         "-c core.pager=…, aliases, hooks and ssh commands run any program",
	"rg":          "--pre runs any program on every file",
	"sed":         "GNU sed's e command runs shell commands and w writes any file",
	"tar":         "--to-command and --use-compress-program run any program",
	"rsync":       "-e/--rsh runs any program",
	"ssh":         "ProxyCommand and LocalCommand run any program",
	"scp":         "-S and ssh options run any program",
	"make":        "a Makefile runs any command",
	"cmake":       "-P scripts and execute_process run any command",
	"ninja":       "a build file runs any command",
	"parallel":    "runs any command it is given",
	"watch":       "runs any command it is given",
	"flock":       "runs any command it is given",
	"strace":      "runs any command it is given",
	"ltrace":      "runs any command it is given",
	"gdb":         "runs any program and shell commands",
	"vim":         "the :! command runs shell commands",
	"vi":          "the :! command runs shell commands",
	"nvim":        "the :! command runs shell commands",
	"emacs":       "runs any Lisp and shell commands",
	"less":        "the ! command and LESSOPEN run shell commands",
	"more":        "the ! command runs shell commands",
	"man":         "a pager and preprocessors run any program",
	"ed":          "the ! command runs shell commands",
	"docker":      "runs any container, including one with the host's root filesystem",
	"podman":      "runs any container, including one with the host's root filesystem",
	"kubectl":     "exec and plugins run any program",
	"systemd-run": "runs any command as a unit",
	"crontab":     "schedules any command",
	"at":          "schedules any command",
	"tmux":        "runs any command in a new window",
	"screen":      "runs any command in a new window",
	"script":      "-c runs any command",
	"busybox":     "each applet is a different program, a shell among them",
	"toybox":      "each applet is a different program, a shell among them",
	// Package managers and build tools run the packages' install and
	// build scripts.
	"npm": "runs packages' install scripts", "pnpm": "runs packages' install scripts",
	"yarn": "runs packages' install scripts", "pip": "runs packages' build scripts",
	"pip3": "runs packages' build scripts", "cargo": "build scripts and cargo-* subcommands run any program",
	"go": "go generate, -toolexec and cgo run any program", "gem": "runs gems' install scripts",
	"bundle": "runs gems' install scripts", "composer": "runs packages' scripts",
	"mvn": "plugins run any code", "gradle": "build scripts run any code",
	"apt": "runs packages' maintainer scripts", "apt-get": "runs packages' maintainer scripts",
	"dpkg": "runs packages' maintainer scripts", "dnf": "runs packages' scripts",
	"yum": "runs packages' scripts", "rpm": "runs packages' scripts",
	"brew": "runs formulae's Ruby code", "pacman": "runs packages' install scripts",
	"apk": "runs packages' install scripts", "nix": "runs any build",
	"conda": "runs packages' scripts", "poetry": "runs packages' build scripts",
}

// RunsAnything reports whether allowlisting the executable at p lets its
// arguments run any program (or write any file), and why: shells,
// interpreters, wrappers, privilege changers, and the programs in
// runsAnything (find, xargs, git, rg, sed, package managers, …). The
// approver UIs show the reason next to a pattern allow-always would add.
func RunsAnything(p string) (why string, ok bool) {
	base := path.Base(p)
	switch classify(base) {
	case kindPOSIXShell, kindShell:
		return "a shell runs any command", true
	case kindInterpreter:
		return "an interpreter runs any code it is given", true
	case kindWrapper, kindCarrier:
		return "runs the command it is given", true
	case kindPrivilege:
		return "runs any command as another user", true
	}
	if why, ok := runsAnything[base]; ok {
		return why, true
	}
	if why, ok := runsAnything[strings.ToLower(base)]; ok {
		return why, true
	}
	return "", false
}
