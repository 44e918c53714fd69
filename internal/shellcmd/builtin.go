package shellcmd

import (
	"path"
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

// shellBuiltinWrappers are builtins that run the rest of their arguments
// as a command: command keeps builtins applying to what it runs, exec
// starts a program.
var shellBuiltinWrappers = map[string]bool{"command": true, "exec": true}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// builtin handles a command the interpreter runs itself (IsBuiltin). Only
// the vouched builtins are accepted (BuiltinRefusal holds the one list);
// their literal arguments are checked here with what the analysis knows
// about run-time values.
func (a *analyzer) builtin(args []arg, st *cwdState, ctx cmdCtx) error {
	name := args[0].val
	if why, ok := failBuiltins[name]; ok {
		f := failf("%s %s", name, why).at(ctx.pos, "")
		if name == "eval" || name == "source" || name == "." {
			f.hint("run the commands it would run directly")
		}
		return f
	}
	if !vouchedBuiltins[name] {
		return failf("%s is a shell builtin the interpreter does not vouch for", name).at(ctx.pos, "").
			hint("run a program by its absolute path instead; the builtins that run inside the interpreter are listed in docs/policy.md")
	}
	for _, x := range args[1:] {
		if x.static {
			continue
		}
		if name == "cd" && ctx.contained {
			continue // cd leaves the directory unknown (a.cd)
		}
		switch name {
		case "cd", "set", "wait", "command", "exec", "type", "export", "readonly":
			return failf("%s with a run-time argument (%s)", name, x.text).at(ctx.pos, "").hint("write it literally")
		case "printf":
			if !args[1].static {
				return failf("printf with a run-time format").at(ctx.pos, "").hint("give printf a literal format")
			}
		case "test", "[":
			// bash's test -v/-R evaluates array subscripts; a run-time
			// operand could become one.
			for _, y := range args[1:] {
				if y.static && strings.Contains(y.val, "[") {
					return failf("%s with run-time operands and a \"[\" in an argument", name).at(ctx.pos, "")
				}
			}
		}
	}
	if f := builtinRefusal(staticValues(args)); f != nil {
		return f.at(ctx.pos, "")
	}
	a.builtins = append(a.builtins, builtinAt(name, ctx.pos))
	switch name {
	case "export":
		for _, x := range args[1:] {
			if n, _, _ := strings.Cut(x.val, "="); x.val != "-p" {
				a.noteEnv(n)
			}
		}
	case "set":
		for _, x := range args[1:] {
			if x.val == "allexport" || (strings.HasPrefix(x.val, "-") && strings.ContainsRune(x.val, 'a')) {
				a.allexport = true
			}
		}
	case "cd":
		return a.cd(args, st, ctx)
	case "command", "exec":
		return a.wrapper(name, wrappers[name], args, st, ctx)
	}
	return nil
}

// staticValues returns the words' values, with run-time words replaced by
// a placeholder that no check takes for an option.
func staticValues(args []arg) []string {
	out := make([]string, len(args))
	for i, x := range args {
		if x.static {
			out[i] = x.val
		} else {
			out[i] = "\x00run-time"
		}
	}
	return out
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
			return failf("cd without an argument and no known home directory").at(ctx.pos, "")
		}
	case len(rest) > 1:
		return failf("cd with more than one argument").at(ctx.pos, "")
	case !rest[0].static && ctx.contained:
		// The interpreter runs it and the walls hold wherever it lands:
		// later relative command paths and redirections fail instead.
		a.accept("cd to a run-time directory")
		*st = cwdState{uncertain: true}
		return nil
	case !rest[0].static:
		return failf("cd to a run-time value (%s)", rest[0].text).at(ctx.pos, "").hint("cd to a literal path")
	case rest[0].val == "-" || strings.HasPrefix(rest[0].val, "-"):
		return failf("cd %s", rest[0].val).at(ctx.pos, " depends on shell state").hint("cd to a literal path")
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
		r1, e1 := a.evalSymlinks(raw)
		r2, e2 := a.evalSymlinks(target)
		if e1 != nil || e2 != nil || r1 != r2 {
			return failf("cd %s uses \"..\" through a symlink", rest[0].val).at(ctx.pos, "").hint("cd to the directory without \"..\"")
		}
	}
	if fi, err := a.osStat(target); err != nil || !fi.IsDir() {
		return failf("cd target %s is not a directory", target).at(ctx.pos, "")
	}
	*st = cwdState{dir: target}
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
