package shellcmd

import (
	"path"
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// cmdCtx is how a command is reached.
type cmdCtx struct {
	// shell is true when the interpreter runs the command as a shell
	// command (so builtins apply), false when it is an argument list run as
	// a program (inside an applied wrapper, or exec'd by another program).
	shell bool
	// interp is true when the interpreter itself starts the command, so
	// applied wrappers and interpreted shells apply and run-time
	// enforcement sees it; false when another program (xargs, sudo, a
	// shell binary) starts it.
	interp bool
	// by names the program that starts the command when interp is false.
	by      string
	applied []string // wrappers the runner applies around the command
	via     []string
	depth   int
	pos     syntax.Pos // position of the simple command, for messages (zero: none)
	// defaultPath is true when the command is found by a program that may
	// not use the host's PATH (env -i, sudo's secure_path, …): a bare name
	// must then resolve to the same file under the usual default paths.
	defaultPath bool
	// tailOpen is true when arguments supplied at run time are appended
	// after the written ones (xargs).
	tailOpen bool
	// contained is true when the contained rules apply to this command
	// (Contained: the walls hold and the interpreter runs it as a shell
	// command).
	contained bool
}

// with returns the context of a command that via runs as a program.
func (c cmdCtx) with(via string) cmdCtx {
	c.via = append(append([]string(nil), c.via...), via)
	c.depth++
	c.shell = false
	return c
}

// startedBy returns the context of a command that program starts itself:
// the interpreter no longer sees it start.
func (c cmdCtx) startedBy(via, program string) cmdCtx {
	c = c.with(via)
	c.interp, c.by = false, program
	return c
}

var assignLike = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\[.*\])?\+?=`)

// command analyses one command given its words: it handles builtins,
// wrappers the runner applies, interpreted shells, wrappers and privilege
// changers whose programs run, and appends segments.
func (a *analyzer) command(args []arg, st *cwdState, ctx cmdCtx) error {
	if ctx.depth > maxDepth {
		return failf("too many nested shells and wrappers (more than %d)", maxDepth)
	}
	if len(args) == 0 {
		if ctx.tailOpen {
			return failf("%s runs a command supplied at run time", lastVia(ctx))
		}
		return nil
	}
	name := args[0]
	if !name.static {
		if name.why == "" {
			name.why = "a run-time value"
		}
		return failf("%s in command position (%s)", name.why, name.text).at(ctx.pos, "")
	}
	if name.val == "" {
		return failf("empty command name").at(ctx.pos, "")
	}
	if ctx.shell && strings.IndexByte(name.val, '=') >= 0 && assignLike.MatchString(name.val) {
		return failf("%q is an assignment in bash", name.val).at(ctx.pos, "").hint("use NAME=value with a plain name")
	}
	bare := !strings.Contains(name.val, "/")
	if _, refused := failBuiltins[name.val]; bare && ctx.shell && (refused || IsBuiltin(name.val)) {
		return a.builtin(args, st, ctx)
	}
	// The words' values, read (never changed) by the parsers below and
	// kept as the segment's argv.
	vals := values(args)
	if ctx.interp && bare && IsApplied(name.val) {
		// Applied when the runner can apply it; otherwise the wrapper's own
		// program runs and is analysed like any other below.
		if ap, err := ParseApplied(vals, func(i int) bool { return args[i].static }); err == nil {
			return a.applied(ap, args, st, ctx)
		}
	}
	if ctx.interp {
		if sc, ok := ParseShellCall(vals, func(i int) bool { return args[i].static }); ok {
			return a.interpretedShell(sc, args, st, ctx)
		}
	}
	base := path.Base(name.val)
	if base == "busybox" || base == "toybox" {
		return failf("%s applets cannot be allowlisted precisely", base).hint("run the applet's own executable by its path")
	}
	seg, err := a.resolveSegment(name, st, ctx)
	if err != nil {
		return err
	}
	seg.Argv = vals
	seg.Dynamic = make([]bool, len(args), len(args)+1)
	for i, x := range args {
		seg.Dynamic[i] = !x.static
	}
	if ctx.tailOpen {
		seg.Argv = append(seg.Argv, "…")
		seg.Dynamic = append(seg.Dynamic, true)
	}
	// Classify by the name as written, else by the file it resolves to, so
	// that a symlink such as ~/bin/e -> /usr/bin/env is still env.
	tool, kind := base, classify(base)
	if kind == kindNone && seg.RealPath != "" {
		tool = path.Base(seg.RealPath)
		kind = classify(tool)
	}
	// A wrapper or shell whose program runs is a segment like any other
	// program: it must match the allowlist itself. When it is the host's
	// real tool (found on the host PATH under its own name, the same file
	// as the one the host PATH finds, or in a system directory) the command
	// it runs is analysed too; anything else (./env) is an ordinary program.
	genuine := func() bool {
		return seg.ResolvedPath != "" &&
			((tool == base && bare) || a.trustedPath(seg, tool, st))
	}
	switch kind {
	case kindCarrier:
		return failf("%s %s, which cannot be looked through", tool, carriers[tool]).hint("run the command directly")
	case kindPrivilege:
		return a.privileged(tool, privilegeChangers[tool], seg, args, st, ctx)
	case kindWrapper:
		if genuine() {
			seg.Role = RoleWrapper
			a.add(seg, ctx)
			by := ctx
			by.interp, by.by = false, seg.ResolvedPath
			return a.wrapper(tool, wrappers[tool], args, st, by)
		}
	case kindPOSIXShell:
		if genuine() {
			return a.shell(args, seg, st, ctx)
		}
		seg.Role = RoleShell
	case kindShell:
		seg.Role = RoleShell
	case kindInterpreter:
		seg.Role = RoleInterpreter
	}
	a.add(seg, ctx)
	return nil
}

// applied analyses a wrapper the runner applies itself (ParseApplied): no
// program of that name runs, and the command it wraps is started by the
// interpreter like any other.
func (a *analyzer) applied(ap Applied, args []arg, st *cwdState, ctx cmdCtx) error {
	for _, kv := range ap.Set {
		name, _, _ := strings.Cut(kv, "=")
		a.noteEnv(name)
	}
	inner := ctx.with(args[0].text)
	inner.applied = append(append([]string(nil), ctx.applied...), ap.Tool)
	// With env -i the command's own searches (a shell's, xargs') use their
	// default path.
	inner.defaultPath = ctx.defaultPath || ap.ClearEnv
	return a.command(args[ap.Inner:], st, inner)
}

// interpretedShell analyses sh/bash -c TEXT that the interpreter runs
// itself: the payload is parsed by the same parser and analysed as text.
func (a *analyzer) interpretedShell(sc ShellCall, args []arg, st *cwdState, ctx cmdCtx) error {
	prog := path.Base(args[0].val)
	inner := ctx.with(args[0].text)
	inner.shell = true
	positional := len(sc.Params) > 0 || sc.Index+1 < len(args) || ctx.tailOpen
	if err := a.text(sc.Payload, *st, inner, positional, false); err != nil {
		return within("in "+prog+" -c payload: ", err)
	}
	return nil
}

func lastVia(ctx cmdCtx) string {
	if len(ctx.via) == 0 {
		return "the command"
	}
	return ctx.via[len(ctx.via)-1]
}

func values(args []arg) []string {
	out := make([]string, len(args))
	for i, x := range args {
		out[i] = x.val
	}
	return out
}

// carriers are programs that run another command in ways this package does
// not parse; their analysis fails rather than guessing.
var carriers = map[string]string{
	"flock": "runs a command", "watch": "runs its command through sh -c", "script": "runs a shell",
	"su": "runs a shell", "runuser": "runs a shell", "sudoedit": "edits files as another user",
	"unshare": "runs a command", "nsenter": "runs a command", "chroot": "runs a command in another root",
	"prlimit": "runs a command", "cgexec": "runs a command", "systemd-run": "runs a command",
	"firejail": "runs a command", "bwrap": "runs a command", "strace": "runs a command",
	"ltrace": "runs a command", "valgrind": "runs a command", "gdb": "runs a command",
	"numactl": "runs a command", "cpulimit": "runs a command", "trickle": "runs a command",
	"proxychains": "runs a command", "proxychains4": "runs a command", "torsocks": "runs a command",
	"tsocks": "runs a command", "faketime": "runs a command", "fakeroot": "runs a command",
	"fakechroot": "runs a command", "sg": "runs a shell command", "newgrp": "runs a shell",
	"caffeinate": "runs a command", "arch": "runs a command", "sandbox-exec": "runs a command",
	"setarch": "runs a command", "linux32": "runs a command", "linux64": "runs a command",
	"unbuffer": "runs a command", "rlwrap": "runs a command", "parallel": "runs commands through a shell",
	"sem": "runs commands through a shell", "chronic": "runs a command", "ifne": "runs a command",
	"entr": "runs a command", "daemonize": "runs a command", "start-stop-daemon": "runs a command",
	"runcon": "runs a command", "capsh": "runs a shell", "setpriv": "runs a command",
	"dbus-run-session": "runs a command", "xvfb-run": "runs a command", "ssh-agent": "runs a command",
	"at": "runs shell commands", "batch": "runs shell commands", "eatmydata": "runs a command",
	"catchsegv": "runs a command", "perf": "runs a command", "chpst": "runs a command",
	"nq": "runs a command", "tmux": "runs shell commands", "screen": "runs shell commands",
}

type programKind int

const (
	kindNone programKind = iota
	kindWrapper
	kindPrivilege
	kindCarrier
	kindPOSIXShell
	kindShell
	kindInterpreter
)

var posixShells = map[string]bool{
	"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "ksh93": true,
	"mksh": true, "lksh": true, "pdksh": true, "oksh": true, "ash": true, "yash": true,
	"posh": true, "rbash": true,
}

var otherShells = map[string]bool{
	"fish": true, "csh": true, "tcsh": true, "nu": true, "pwsh": true, "powershell": true,
	"xonsh": true, "elvish": true, "rc": true, "es": true, "scsh": true, "ion": true,
}

var interpreters = map[string]bool{
	"python": true, "pypy": true, "node": true, "nodejs": true, "perl": true, "ruby": true,
	"irb": true, "php": true, "lua": true, "luajit": true, "awk": true, "gawk": true,
	"mawk": true, "nawk": true, "tclsh": true, "wish": true, "expect": true, "rscript": true,
	"r": true, "osascript": true, "deno": true, "bun": true, "java": true, "jshell": true,
	"groovy": true, "scala": true, "kotlin": true, "julia": true, "erl": true,
	"escript": true, "elixir": true, "iex": true, "guile": true, "racket": true,
	"sbcl": true, "clisp": true, "ghci": true, "runghc": true, "runhaskell": true,
	"jruby": true, "jython": true, "swift": true, "dotnet": true,
	"ts-node": true, "tsx": true, "npx": true, "bunx": true, "uv": true, "uvx": true,
	"pipx": true,
}

// classify says what kind of program a file name is. Version suffixes
// (python3.12, perl5.36, tclsh8.6) are ignored for interpreters.
func classify(base string) programKind {
	if k, ok := kinds[base]; ok {
		return k
	}
	b := strings.ToLower(base)
	b = strings.TrimRight(b, "0123456789.")
	b = strings.TrimSuffix(b, "-")
	if b != base && interpreters[b] {
		return kindInterpreter
	}
	return kindNone
}

// kinds is classify's answer for every name the tables list, so that a
// name costs one lookup: each kind is entered over the ones after it in
// classify's order (wrappers but the shell's builtin ones, privilege
// changers, carriers, POSIX shells, other shells, interpreters).
var kinds = func() map[string]programKind {
	m := map[string]programKind{}
	for n, ok := range interpreters {
		if ok {
			m[n] = kindInterpreter
		}
	}
	for n, ok := range otherShells {
		if ok {
			m[n] = kindShell
		}
	}
	for n, ok := range posixShells {
		if ok {
			m[n] = kindPOSIXShell
		}
	}
	for n, why := range carriers {
		if why != "" {
			m[n] = kindCarrier
		}
	}
	for n := range privilegeChangers {
		m[n] = kindPrivilege
	}
	for n := range wrappers {
		if !shellBuiltinWrappers[n] {
			m[n] = kindWrapper
		}
	}
	return m
}()
