package policy

import (
	"path"
	"sort"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// ExpandHome replaces a leading "~" or "~/" in p with home. Other "~user"
// forms are left alone (they never match, and Lint says so).
func ExpandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") && home != "" {
		return strings.TrimSuffix(home, "/") + p[1:]
	}
	return p
}

// MatchPattern reports whether an allowlist pattern matches an absolute,
// cleaned executable path. Patterns are path globs: "*" and "?" stay within
// one path segment, "**" spans segments, "~" is the host user's home, and
// matching is case-insensitive — but a path that matches only when case is
// ignored is a different file on a case-sensitive filesystem ("/x/head" is
// not "/x/HEAD"), so MatchPattern, which cannot look at files, refuses
// such fold-only matches; Allowlist.SameFile accepts them when they are
// the same file. A pattern without a "/" (a bare name such as "rg")
// matches nothing: allowlists are about where a binary lives, not what it
// is called, and Lint warns about such patterns.
func MatchPattern(pattern, absPath, home string) bool {
	r := FoldMatch(pattern, absPath, home)
	return r.Matched && !r.FoldOnly
}

// Fold is the verdict of FoldMatch.
type Fold struct {
	// Matched: the pattern matches the path when case is ignored.
	Matched bool
	// FoldOnly: it does not match with case respected.
	FoldOnly bool
	// Spelling is, for a fold-only match, the path spelled as the pattern
	// spells its literal part (pattern "/X/Head", path "/x/head" → "/X/Head"):
	// the file the pattern's author named. Empty when the difference lies
	// in the part a wildcard matched, where no spelling can be derived (such
	// a match is refused).
	Spelling string
}

// FoldMatch matches pattern against absPath case-insensitively and says
// whether the match holds only because case was ignored, and which path
// the pattern's own spelling names. It is pure; callers with a filesystem
// decide whether Spelling and absPath are the same file.
func FoldMatch(pattern, absPath, home string) Fold {
	pattern = strings.TrimSpace(pattern)
	if pattern == "" || absPath == "" || !strings.HasPrefix(absPath, "/") {
		return Fold{}
	}
	pattern = ExpandHome(pattern, home)
	// An invalid glob matches nothing, judged as written: cleaning can
	// make one valid ("/[/.." cleans to "/"), and CompileAllowlist drops
	// it before cleaning.
	if !strings.HasPrefix(pattern, "/") || !doublestar.ValidatePattern(pattern) {
		return Fold{}
	}
	clean, cpath := path.Clean(pattern), path.Clean(absPath)
	ok, err := doublestar.Match(strings.ToLower(clean), strings.ToLower(cpath))
	if err != nil || !ok {
		return Fold{}
	}
	return caseVerdict(clean, cpath)
}

// caseVerdict decides, for a pattern that matched a path case-insensitively
// (both cleaned), whether case matters and the pattern's spelling.
func caseVerdict(clean, cpath string) Fold {
	if ok, err := doublestar.Match(clean, cpath); err == nil && ok {
		return Fold{Matched: true}
	}
	lit := clean
	if meta := strings.IndexAny(clean, "*?[{\\"); meta >= 0 {
		lit = clean[:strings.LastIndexByte(clean[:meta], '/')+1]
	}
	f := Fold{Matched: true, FoldOnly: true}
	if len(cpath) >= len(lit) && strings.EqualFold(cpath[:len(lit)], lit) {
		spelling := lit + cpath[len(lit):]
		if ok, err := doublestar.Match(clean, spelling); err == nil && ok {
			f.Spelling = spelling
		}
	}
	return f
}

// FirstMatch returns the first pattern that matches absPath, or "", with
// fold-only matches accepted only when sameFile says the pattern's
// spelling and absPath are the same file (nil: never). It is the simple
// reference for Allowlist.Match.
func FirstMatch(patterns []string, absPath, home string, sameFile func(spelling, path string) bool) string {
	for _, p := range patterns {
		r := FoldMatch(p, absPath, home)
		if r.Matched && (!r.FoldOnly || (r.Spelling != "" && sameFile != nil && sameFile(r.Spelling, absPath))) {
			return p
		}
	}
	return ""
}

// MatchAll matches every resolved executable path of a command against the
// allowlist patterns; see Allowlist.MatchAll. Compile once with
// CompileAllowlist when matching many commands.
func MatchAll(patterns []string, absPaths []string, home string) (matched []string, satisfied bool) {
	return CompileAllowlist(patterns, home).MatchAll(absPaths)
}

// CanMatch reports whether pattern could ever match an executable path:
// false for empty, bare-name, relative, ~user and invalid patterns. Tools
// refuse to add such patterns rather than store an entry that silently
// allows nothing.
func CanMatch(pattern string) bool {
	p := strings.TrimSpace(pattern)
	if strings.HasPrefix(p, "~/") || p == "~" {
		p = "/home" + strings.TrimPrefix(p, "~")
	}
	return strings.HasPrefix(p, "/") && doublestar.ValidatePattern(p)
}

// LintPattern returns a warning for a pattern that can never match or that
// is suspiciously broad, or "" when it looks fine.
func LintPattern(pattern string) string {
	p := strings.TrimSpace(pattern)
	switch {
	case p == "":
		return "empty pattern matches nothing"
	case strings.HasPrefix(p, "~") && p != "~" && !strings.HasPrefix(p, "~/"):
		return "pattern " + quote(p) + " uses ~user, which is not expanded; it matches nothing"
	case !strings.Contains(p, "/"):
		return "pattern " + quote(p) + " has no '/': patterns match absolute paths, so it matches nothing (did you mean \"/usr/bin/" + p + "\"?)"
	case !strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "~/"):
		return "pattern " + quote(p) + " is relative: patterns match absolute paths, so it matches nothing"
	case !doublestar.ValidatePattern(p):
		return "pattern " + quote(p) + " is not a valid glob; it matches nothing"
	case p == "/**" || p == "/*" || p == "~/**" || strings.HasPrefix(p, "/**/"):
		return "pattern " + quote(p) + " matches almost every executable; security=full says that more honestly"
	}
	return ""
}

func quote(s string) string { return "\"" + s + "\"" }

// dangerousEnvExact lists variables that change what a program loads or
// executes, so setting them in a request would let an allowlisted binary run
// something else entirely.
var dangerousEnvExact = map[string]bool{
	"PATH": true, "BASH_ENV": true, "ENV": true, "IFS": true, "SHELLOPTS": true,
	"BASHOPTS": true, "PS4": true, "PROMPT_COMMAND": true, "ZDOTDIR": true,
	"HOME": true, "CDPATH": true, "GLOBIGNORE": true,
	"NODE_OPTIONS": true, "NODE_PATH": true, "PYTHONPATH": true, "PYTHONHOME": true,
	"PYTHONSTARTUP": true, "PYTHONINSPECT": true, "PERL5LIB": true, "PERL5OPT": true,
	"PERLLIB": true, "PERL5DB": true, "RUBYOPT": true, "RUBYLIB": true,
	"JAVA_TOOL_OPTIONS": true, "_JAVA_OPTIONS": true, "JDK_JAVA_OPTIONS": true,
	"CLASSPATH": true, "GCONV_PATH": true, "HOSTALIASES": true, "LOCPATH": true,
	"PAGER": true, "EDITOR": true, "VISUAL": true, "BROWSER": true, "MANPAGER": true,
	"LESSOPEN": true, "LESSCLOSE": true, "SSH_ASKPASS": true, "SUDO_ASKPASS": true,
	"TERMINFO": true, "NLSPATH": true, "MALLOC_CHECK_": true, "OPENSSL_CONF": true,
	"XDG_CONFIG_HOME": true, "XDG_CONFIG_DIRS": true,
	// Variables that change how a shell finds or runs commands (bash on
	// macOS is /bin/sh): EXECIGNORE hides files from PATH lookup, FPATH and
	// MODULE_PATH load code, PWD/OLDPWD/CDPATH change where cd goes.
	"EXECIGNORE": true, "FPATH": true, "MODULE_PATH": true, "PWD": true, "OLDPWD": true,
	"POSIXLY_CORRECT": true, "HISTFILE": true, "MAILPATH": true, "MAIL": true, "OPTIND": true,
	"INPUTRC": true, "KSH_ENV": true,
}

var dangerousEnvPrefixes = []string{"LD_", "DYLD_", "GIT_", "BASH", "NPM_CONFIG_", "PIP_", "PYTHON", "PERL", "RUBY", "LUA_", "GEM_", "BUNDLE_"}

// shellStartupEnv lists inherited variables that make a shell read files,
// run code or change how it finds and splits commands; they are stripped
// from the environment every command runs with, whoever set them, and no
// command may set them. Every BASH* name is one too (BASH_ENV,
// BASH_FUNC_name%% exported functions, BASH_XTRACEFD, …).
var shellStartupEnv = map[string]bool{
	"BASH_ENV": true, "ENV": true, "CDPATH": true, "EXECIGNORE": true, "FPATH": true,
	"GLOBIGNORE": true, "SHELLOPTS": true, "BASHOPTS": true, "PS4": true, "PROMPT_COMMAND": true,
	"IFS": true, "POSIXLY_CORRECT": true, "ZDOTDIR": true, "KSH_ENV": true, "INPUTRC": true,
}

// ShellStartupEnv reports whether an inherited variable must be dropped
// from a command's environment before /bin/sh sees it. Case is ignored,
// to fail closed on platforms that fold it.
func ShellStartupEnv(name string) bool {
	n := strings.ToUpper(name)
	return strings.HasPrefix(n, "BASH") || shellStartupEnv[n]
}

// DangerousEnv reports whether setting the environment variable name in an
// exec request must be refused because it could change what runs (the
// "environment prefix" bypass class). Names are compared upper-cased, so
// case never matters ("ld_preload" is refused like LD_PRELOAD): some
// platforms fold case in the environment, and failing closed costs nothing.
func DangerousEnv(name string) bool {
	n := strings.ToUpper(name)
	if n == "" || strings.ContainsAny(n, "=\x00") {
		return true
	}
	if dangerousEnvExact[n] {
		return true
	}
	for _, p := range dangerousEnvPrefixes {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

// safeEnv are the variables any command may give its programs without an
// environment allowlist entry: they choose a language, a time zone or how
// output looks, never what is loaded or run.
var safeEnv = map[string]bool{
	"LANG": true, "LANGUAGE": true, "LC_ALL": true, "LC_ADDRESS": true, "LC_COLLATE": true,
	"LC_CTYPE": true, "LC_IDENTIFICATION": true, "LC_MEASUREMENT": true, "LC_MESSAGES": true,
	"LC_MONETARY": true, "LC_NAME": true, "LC_NUMERIC": true, "LC_PAPER": true,
	"LC_TELEPHONE": true, "LC_TIME": true, "TZ": true, "TERM": true, "COLORTERM": true,
	"COLUMNS": true, "LINES": true, "NO_COLOR": true, "FORCE_COLOR": true, "CLICOLOR": true,
	"CLICOLOR_FORCE": true, "CI": true,
}

// SafeEnvNames returns the built-in safe set, sorted, for documentation
// and `approvals get`.
func SafeEnvNames() []string {
	out := make([]string, 0, len(safeEnv))
	for n := range safeEnv {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// RefusedEnv reports whether a command may never set name, whatever the
// environment allowlist says: DangerousEnv and the shell start-up names.
func RefusedEnv(name string) bool {
	return DangerousEnv(name) || ShellStartupEnv(name)
}

// EnvPermitted reports whether a command may give its programs the
// variable name: not RefusedEnv, and either in the built-in safe set or
// matched by an entry of allow (NAME exactly, or PREFIX* for every name
// starting with PREFIX). Anything else is an environment miss, handled
// like an executable the allowlist does not cover.
func EnvPermitted(name string, allow []string) bool {
	if RefusedEnv(name) {
		return false
	}
	if safeEnv[name] {
		return true
	}
	for _, a := range allow {
		if p, ok := strings.CutSuffix(a, "*"); ok {
			if p != "" && strings.HasPrefix(name, p) {
				return true
			}
		} else if a == name {
			return true
		}
	}
	return false
}

// LintEnvPattern returns why an environment allowlist entry is not valid,
// or "" when it is: a variable name, or a non-empty name prefix followed
// by one "*". A valid entry that names a refused variable is reported too:
// no entry can lift that refusal.
func LintEnvPattern(p string) string {
	name, _ := strings.CutSuffix(p, "*")
	if name == "" || strings.Trim(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != "" || (name[0] >= '0' && name[0] <= '9') {
		return "env entry " + quote(p) + " is not a variable name or NAME_PREFIX*; it matches nothing"
	}
	if !strings.HasSuffix(p, "*") && RefusedEnv(p) {
		return "env entry " + quote(p) + " names a variable that can change what runs; it is refused whatever the allowlist says"
	}
	return ""
}
