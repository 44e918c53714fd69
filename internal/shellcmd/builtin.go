package shellcmd

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/exechost/exechost/internal/policy"
)

// failBuiltins change how later text executes, or assign variables in ways
// that bash evaluates (array subscripts run command substitutions), so the
// analysis cannot follow them. The value says why.
var failBuiltins = map[string]string{
	"eval": "runs its arguments as shell text", "source": "runs a file as shell text",
	".": "runs a file as shell text", "alias": "changes what later names run",
	"unalias": "changes what later names run", "trap": "runs shell text on signals",
	"unset": "changes shell state", "shopt": "changes shell behaviour", "enable": "changes which builtins exist",
	"builtin": "runs builtins by name", "hash": "changes command lookup", "ulimit": "changes resource limits",
	"umask": "changes file permissions", "local": "assigns variables", "declare": "assigns variables",
	"typeset": "assigns variables", "let": "evaluates arithmetic", "read": "assigns variables from input",
	"mapfile": "assigns variables from input", "readarray": "assigns variables from input",
	"getopts": "assigns variables", "pushd": "changes directory dynamically", "popd": "changes directory dynamically",
	"dirs": "changes the directory stack", "fc": "runs commands from history", "history": "runs commands from history",
	"bind": "changes key bindings", "complete": "changes completion", "compgen": "runs completion functions",
	"fg": "resumes jobs", "bg": "resumes jobs", "disown": "changes jobs",
	"suspend": "suspends the shell", "logout": "changes the shell session", "caller": "inspects functions",
	"setopt": "changes shell behaviour", "unsetopt": "changes shell behaviour", "emulate": "changes shell behaviour",
	"autoload": "loads functions", "zmodload": "loads shell modules", "functions": "changes functions",
	"noglob": "is a zsh precommand modifier", "nocorrect": "is a zsh precommand modifier",
	"repeat": "is a zsh loop", "foreach": "is a zsh loop", "coproc": "starts a coprocess",
	"select": "is a bash loop", "function": "defines a function", "[[": "is bash-only syntax",
	"]]": "is bash-only syntax", "whence": "inspects shell state",
}

// noopBuiltins run nothing and change nothing the analysis tracks.
var noopBuiltins = map[string]bool{
	":": true, "exit": true, "return": true, "break": true, "continue": true, "shift": true,
	"type": true, "jobs": true,
}

// shellBuiltinWrappers run the rest of their arguments as a command from
// inside the shell, so builtins still apply to what they run.
var shellBuiltinWrappers = map[string]bool{"command": true, "exec": true, "time": true}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// safeSetOptions are `set` options that change error handling or tracing
// only, never which commands run or how words are read.
var safeSetOptions = map[string]bool{
	"e": true, "u": true, "x": true, "v": true, "f": true, "n": true, "C": true, "a": true,
	"errexit": true, "nounset": true, "xtrace": true, "verbose": true, "noglob": true,
	"noexec": true, "noclobber": true, "allexport": true, "pipefail": true,
}

// builtin handles a command the shell runs itself. done is true when the
// command was fully handled (no executable to resolve).
func (a *analyzer) builtin(args []arg, st *cwdState, ctx cmdCtx) (done bool, err error) {
	name := args[0].val
	if why, ok := failBuiltins[name]; ok {
		hint := ""
		if name == "eval" || name == "source" || name == "." {
			hint = " (hint: run the commands it would run directly)"
		}
		return true, failf("%s %s%s%s", name, why, posSuffix(ctx), hint)
	}
	switch {
	case noopBuiltins[name]:
		return true, nil
	case name == "cd":
		return true, a.cd(args, st, ctx)
	case name == "export" || name == "readonly":
		return true, exportArgs(args, ctx)
	case name == "set":
		return true, setArgs(args, ctx)
	case name == "wait":
		for _, x := range args[1:] {
			if !x.static || strings.HasPrefix(x.val, "-") {
				return true, failf("wait with options or run-time arguments%s", posSuffix(ctx))
			}
		}
		return true, nil
	case name == "test" || name == "[":
		// bash's test -v/-R evaluates array subscripts, which run command
		// substitutions stored in strings.
		dynamic, bracket := false, false
		for _, x := range args[1:] {
			if x.static && (x.val == "-v" || x.val == "-R") {
				return true, failf("%s %s%s is bash-only and evaluates variable names", name, x.val, posSuffix(ctx))
			}
			dynamic = dynamic || !x.static
			bracket = bracket || (x.static && strings.Contains(x.val, "["))
		}
		if dynamic && bracket {
			return true, failf("%s with run-time operands and a \"[\" in an argument%s", name, posSuffix(ctx))
		}
	case name == "printf":
		if len(args) > 1 && (!args[1].static || strings.HasPrefix(args[1].val, "-v")) {
			return true, failf("printf with a run-time format or -v%s (hint: give printf a literal format)", posSuffix(ctx))
		}
	}
	return false, nil
}

// cd updates the working directory used to resolve later relative names.
func (a *analyzer) cd(args []arg, st *cwdState, ctx cmdCtx) error {
	rest := args[1:]
	for len(rest) > 0 && rest[0].static && (rest[0].val == "-L" || rest[0].val == "-P") {
		rest = rest[1:]
	}
	if len(rest) > 0 && rest[0].static && rest[0].val == "--" {
		rest = rest[1:]
	}
	var target string
	switch {
	case len(rest) == 0:
		target = a.env.Home
		if target == "" {
			return failf("cd without an argument and no known home directory%s", posSuffix(ctx))
		}
	case len(rest) > 1:
		return failf("cd with more than one argument%s", posSuffix(ctx))
	case !rest[0].static:
		return failf("cd to a run-time value (%s)%s (hint: cd to a literal path)", rest[0].text, posSuffix(ctx))
	case rest[0].val == "-" || strings.HasPrefix(rest[0].val, "-"):
		return failf("cd %s%s depends on shell state (hint: cd to a literal path)", rest[0].val, posSuffix(ctx))
	default:
		target = rest[0].val
	}
	raw := target
	if !strings.HasPrefix(target, "/") {
		if st.uncertain || st.dir == "" {
			*st = cwdState{dir: st.dir, uncertain: true}
			return nil
		}
		raw = st.dir + "/" + target
	}
	// cd -L (the default) resolves ".." lexically, like path.Clean, but
	// only when the shell knows its logical directory; otherwise, and with
	// -P, ".." follows the physical path. Both must agree.
	target = path.Clean(raw)
	if hasDotDot(raw) {
		r1, e1 := filepath.EvalSymlinks(raw)
		r2, e2 := filepath.EvalSymlinks(target)
		if e1 != nil || e2 != nil || r1 != r2 {
			return failf("cd %s uses \"..\" through a symlink%s (hint: cd to the directory without \"..\")", rest[0].val, posSuffix(ctx))
		}
	}
	if fi, err := os.Stat(target); err != nil || !fi.IsDir() {
		return failf("cd target %s is not a directory%s", target, posSuffix(ctx))
	}
	*st = cwdState{dir: target}
	return nil
}

func exportArgs(args []arg, ctx cmdCtx) error {
	for _, x := range args[1:] {
		if !x.static {
			return failf("%s of a run-time value (%s)%s", args[0].val, x.text, posSuffix(ctx))
		}
		if x.val == "-p" {
			continue
		}
		n, _, _ := strings.Cut(x.val, "=")
		if !envName.MatchString(n) {
			return failf("%s %q%s is not a plain variable name", args[0].val, x.val, posSuffix(ctx))
		}
		if dangerousVar(n) {
			return failf("%s %s%s changes what runs (hint: dangerous environment variables cannot be set in a command)", args[0].val, n, posSuffix(ctx))
		}
	}
	return nil
}

func setArgs(args []arg, ctx cmdCtx) error {
	rest := args[1:]
	for i := 0; i < len(rest); i++ {
		x := rest[i]
		if !x.static {
			return failf("set with a run-time argument (%s)%s", x.text, posSuffix(ctx))
		}
		if x.val == "--" || x.val == "-" {
			return nil // the rest are positional parameters: data
		}
		if len(x.val) < 2 || (x.val[0] != '-' && x.val[0] != '+') {
			return nil // positional parameters
		}
		for _, c := range x.val[1:] {
			if c == 'o' {
				i++
				if i >= len(rest) || !rest[i].static || !safeSetOptions[rest[i].val] {
					return failf("set -o with an option that is not known to be harmless%s", posSuffix(ctx))
				}
				continue
			}
			if !safeSetOptions[string(c)] {
				return failf("set %c%c%s changes how the shell runs commands (hint: only -e -u -x -v -f -n -C -a and -o pipefail are allowed)", x.val[0], c, posSuffix(ctx))
			}
		}
	}
	return nil
}

// shellStateVars change how the shell itself finds or runs commands, so
// assigning them is refused on top of policy.DangerousEnv: EXECIGNORE hides
// executables from PATH search, FPATH autoloads ksh and zsh functions,
// PWD and OLDPWD steer cd, BASH_LOADABLES_PATH loads builtins, and the
// compatibility switches change how text is parsed.
var shellStateVars = map[string]bool{
	"PWD": true, "OLDPWD": true, "FPATH": true, "EXECIGNORE": true, "BASH_LOADABLES_PATH": true,
	"BASH_COMPAT": true, "POSIXLY_CORRECT": true, "BASH_XTRACEFD": true, "MODULE_PATH": true,
	"HISTFILE": true, "MAILPATH": true, "MAIL": true, "OPTIND": true,
}

// dangerousVar reports whether assigning the variable could change what
// runs: policy.DangerousEnv, plus the shell's own state variables and every
// BASH* variable (BASH_ALIASES and BASH_CMDS rewrite aliases and the
// command hash table).
func dangerousVar(name string) bool {
	n := strings.ToUpper(name)
	return policy.DangerousEnv(name) || shellStateVars[n] || strings.HasPrefix(n, "BASH")
}
