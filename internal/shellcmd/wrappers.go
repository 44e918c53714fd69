package shellcmd

import (
	"regexp"
	"strings"
)

// wrapState collects what a wrapper's options mean for the command it runs.
type wrapState struct {
	noCommand   bool   // the options say nothing is run (--help, command -v, …)
	defaultPath bool   // the inner name is not looked up on the host PATH
	repl        string // xargs -I replacement string
}

// wrapperSpec describes a program that runs its operands as a command.
type wrapperSpec struct {
	opts optSet
	// operands is how many operands come before the command (timeout's
	// duration, taskset's mask).
	operands int
	// on interprets one option; nil means options carry no meaning.
	on func(ws *wrapState, key, val string) error
	// after consumes words between the options and the command (env's
	// NAME=VALUE, nice's legacy -N, chrt's priority).
	after func(ws *wrapState, args []arg) (int, error)
	// keepShell is true when the wrapped command still runs inside the
	// shell (command, bash's time keyword), so builtins apply to it.
	keepShell bool
}

func longs(extra map[string]string) map[string]string {
	m := map[string]string{"help": "help", "version": "version"}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func noCommandOn(keys ...string) func(ws *wrapState, key, val string) error {
	return func(ws *wrapState, key, val string) error {
		for _, k := range append(keys, "help", "version") {
			if key == k {
				ws.noCommand = true
			}
		}
		return nil
	}
}

var numeric = regexp.MustCompile(`^[0-9]+$`)

var wrappers = map[string]wrapperSpec{
	"env": {
		opts: optSet{
			flags: "i0v", withArg: "uSCP",
			long: longs(map[string]string{
				"ignore-environment": "i", "null": "0", "debug": "v", "unset=": "u",
				"chdir=": "C", "split-string=": "S", "block-signal?": "sig", "default-signal?": "sig",
				"ignore-signal?": "sig", "list-signal-handling": "sig",
			}),
			fail: map[string]string{
				"S": "splits a string into a command line (hint: write the command directly)",
				"C": "changes directory (hint: cd first, then run the command)",
				"P": "searches an alternate path",
			},
		},
		on: func(ws *wrapState, key, val string) error {
			switch key {
			case "i":
				ws.defaultPath = true
			case "u":
				if val == "PATH" {
					ws.defaultPath = true
				}
			case "help", "version":
				ws.noCommand = true
			}
			return nil
		},
		after: func(ws *wrapState, args []arg) (int, error) {
			i := 0
			if i < len(args) && args[i].static && args[i].val == "-" {
				ws.defaultPath = true
				i++
			}
			for ; i < len(args); i++ {
				if !args[i].static {
					return 0, failf("run-time value %s in the arguments of env", args[i].text).hint("write NAME=VALUE and the command literally")
				}
				name, _, ok := strings.Cut(args[i].val, "=")
				if !ok {
					break
				}
				if name == "" || dangerousVar(name) {
					return 0, failf("env sets %s, which changes what runs", name).hint("dangerous environment variables cannot be set in a command")
				}
			}
			return i, nil
		},
	},
	"nice": {
		opts: optSet{withArg: "n", long: longs(map[string]string{"adjustment=": "n"})},
		on:   noCommandOn(),
	},
	"nohup":   {opts: optSet{long: longs(nil)}, on: noCommandOn()},
	"setsid":  {opts: optSet{flags: "cfw", long: longs(map[string]string{"ctty": "c", "fork": "f", "wait": "w"})}, on: noCommandOn()},
	"timeout": {opts: optSet{flags: "fpv", withArg: "ks", long: longs(map[string]string{"foreground": "f", "preserve-status": "p", "verbose": "v", "kill-after=": "k", "signal=": "s"})}, on: noCommandOn(), operands: 1},
	"stdbuf":  {opts: optSet{withArg: "ioe", long: longs(map[string]string{"input=": "i", "output=": "o", "error=": "e"})}, on: noCommandOn()},
	"time": {
		opts: optSet{
			flags: "pvqa", withArg: "fo",
			long: longs(map[string]string{"portability": "p", "verbose": "v", "quiet": "q", "append": "a", "format=": "f", "output=": "o"}),
			fail: map[string]string{"o": "writes a file (hint: let the output go to stderr)"},
		},
		on: noCommandOn(), keepShell: true,
	},
	"command": {
		opts:      optSet{flags: "pvV", fail: map[string]string{"p": "searches a default PATH (hint: write the absolute path)"}},
		on:        noCommandOn("v", "V"),
		keepShell: true,
	},
	"exec": {opts: optSet{}},
	"xargs": {
		opts: optSet{
			flags: "0oprtx", withArg: "adEILnPs", optArg: "eil",
			long: longs(map[string]string{
				"null": "0", "open-tty": "o", "interactive": "p", "no-run-if-empty": "r", "verbose": "t",
				"exit": "x", "show-limits": "show-limits", "arg-file=": "a", "delimiter=": "d",
				"max-lines?": "l", "max-args=": "n", "max-procs=": "P", "max-chars=": "s",
				"replace?": "i", "eof?": "e", "process-slot-var=": "process-slot-var",
			}),
		},
		on: func(ws *wrapState, key, val string) error {
			switch key {
			case "I":
				ws.repl = val
			case "i":
				ws.repl = val
				if ws.repl == "" {
					ws.repl = "{}"
				}
			case "process-slot-var":
				if dangerousVar(val) {
					return failf("xargs --process-slot-var=%s sets a variable that changes what runs", val)
				}
			case "help", "version":
				ws.noCommand = true
			}
			return nil
		},
	},
	"ionice": {
		opts: optSet{flags: "t", withArg: "cnpPu", long: longs(map[string]string{"class=": "c", "classdata=": "n", "pid=": "p", "pgid=": "P", "uid=": "u", "ignore": "t"})},
		on:   noCommandOn("p", "P", "u"),
	},
	"chrt": {
		opts: optSet{
			flags: "abdfiormRvp", withArg: "TPD",
			long: longs(map[string]string{
				"all-tasks": "a", "batch": "b", "deadline": "d", "fifo": "f", "idle": "i", "other": "o",
				"rr": "r", "reset-on-fork": "R", "verbose": "v", "max": "m", "pid": "p",
				"sched-runtime=": "T", "sched-period=": "P", "sched-deadline=": "D",
			}),
		},
		on: noCommandOn("m", "p"),
		after: func(ws *wrapState, args []arg) (int, error) {
			if len(args) > 0 && args[0].static && numeric.MatchString(args[0].val) {
				return 1, nil
			}
			if len(args) > 0 && !args[0].static {
				return 0, failf("run-time value %s as chrt's priority", args[0].text)
			}
			return 0, nil
		},
	},
	"taskset": {
		opts:     optSet{flags: "acp", long: longs(map[string]string{"all-tasks": "a", "cpu-list": "c", "pid": "p"})},
		on:       noCommandOn("p"),
		operands: 1,
	},
}

// legacyNice matches nice's historical "-N" / "--N" adjustment.
var legacyNice = regexp.MustCompile(`^--?[0-9]+$`)

// wrapper looks through a wrapper to the command it runs.
// tool is the wrapper's own name (env, nice, …), even when it was reached
// through a symlink of another name.
func (a *analyzer) wrapper(tool string, spec wrapperSpec, args []arg, st *cwdState, ctx cmdCtx) error {
	name := args[0]
	prog := tool
	rest := args[1:]
	if tool == "nice" {
		if len(rest) > 0 && rest[0].static && legacyNice.MatchString(rest[0].val) {
			rest = rest[1:]
		}
	}
	ws := &wrapState{}
	on := spec.on
	if on == nil {
		on = func(*wrapState, string, string) error { return nil }
	}
	n, err := parseOpts(prog, rest, spec.opts, ctx.tailOpen, func(k, v string) error { return on(ws, k, v) })
	if err != nil {
		return err
	}
	if ws.noCommand {
		return nil
	}
	rest = rest[n:]
	if spec.after != nil {
		m, err := spec.after(ws, rest)
		if err != nil {
			return err
		}
		if tool == "env" {
			for _, x := range rest[:m] {
				if name, _, ok := strings.Cut(x.val, "="); ok {
					a.noteEnv(name)
				}
			}
		}
		rest = rest[m:]
	}
	for k := 0; k < spec.operands; k++ {
		if len(rest) == 0 {
			if ctx.tailOpen {
				return failf("%s receives its operands at run time", prog)
			}
			return nil // a usage error: nothing runs
		}
		if !rest[0].static {
			return failf("run-time value %s as an operand of %s", rest[0].text, prog)
		}
		rest = rest[1:]
	}
	inner := ctx.with(name.text)
	inner.defaultPath = ctx.defaultPath || ws.defaultPath
	inner.shell = ctx.shell && spec.keepShell
	if tool == "xargs" {
		inner.tailOpen = ws.repl == ""
		if len(rest) == 0 {
			rest = []arg{{val: "echo", static: true, text: "echo"}}
		}
		if ws.repl != "" {
			rest = append([]arg(nil), rest...)
			for i, x := range rest {
				if !x.static || strings.Contains(x.val, ws.repl) {
					rest[i] = arg{val: x.text, text: x.text, why: "replaced by xargs input"}
				}
			}
		}
	}
	if len(rest) == 0 {
		if ctx.tailOpen {
			return failf("%s runs a command supplied at run time", prog)
		}
		return nil
	}
	return a.command(rest, st, inner)
}
