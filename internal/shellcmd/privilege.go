package shellcmd

import (
	"strings"
)

// privilegeSpec describes a privilege changer: it is a segment itself (it
// must match) and the command it runs is another.
type privilegeSpec struct {
	opts optSet
	on   func(ws *wrapState, key, val string) error
	// envAssign is true when NAME=VALUE words may precede the command.
	envAssign bool
	// needsCommand is true when running without a command starts a shell.
	needsCommand bool
}

var privilegeChangers = map[string]privilegeSpec{
	"sudo": {
		opts: optSet{
			flags: "AbBEeHhiKklnNPSsVv", withArg: "CDgprRtTUu",
			long: longs(map[string]string{
				"askpass": "A", "background": "b", "bell": "B", "close-from=": "C", "chdir=": "D",
				"preserve-env?": "E", "edit": "e", "group=": "g", "set-home": "H", "host=": "host",
				"login": "i", "remove-timestamp": "K", "reset-timestamp": "k", "list": "l",
				"non-interactive": "n", "no-update": "N", "preserve-groups": "P", "prompt=": "p",
				"chroot=": "R", "role=": "r", "stdin": "S", "shell": "s", "type=": "t",
				"command-timeout=": "T", "other-user=": "U", "user=": "u", "validate": "v",
			}),
			fail: map[string]string{
				"E": "keeps the caller's environment", "e": "edits files", "i": "runs a login shell",
				"s": "runs a shell", "D": "changes directory", "R": "changes the root directory",
				"h": "is help or a remote host", "host": "runs on another host",
			},
		},
		on:        noCommandOn("K", "l", "v", "V"),
		envAssign: true,
	},
	"doas": {
		opts: optSet{
			flags: "nLs", withArg: "uaC",
			fail: map[string]string{"s": "runs a shell", "C": "checks a configuration file"},
		},
		on:           noCommandOn("L"),
		needsCommand: true,
	},
	"run0": {
		opts: optSet{
			withArg: "ugD",
			long: longs(map[string]string{
				"user=": "u", "group=": "g", "nice=": "nice", "chdir=": "D", "setenv=": "setenv",
				"property=": "property", "unit=": "unit", "description=": "description", "slice=": "slice",
				"slice-inherit": "slice-inherit", "background=": "background", "machine=": "machine",
				"pty": "pty", "pipe": "pipe", "no-ask-password": "no-ask-password",
				"shell-prompt-prefix=": "prefix", "via-shell": "via-shell",
			}),
			fail: map[string]string{
				"D": "changes directory", "setenv": "sets environment variables", "property": "sets unit properties",
				"machine": "runs on another machine", "via-shell": "runs a shell",
			},
		},
		on:           noCommandOn(),
		needsCommand: true,
	},
	"pkexec": {
		opts: optSet{long: longs(map[string]string{
			"user=": "u", "disable-internal-agent": "dia", "keep-cwd": "keep-cwd",
		})},
		on:           noCommandOn(),
		needsCommand: true,
	},
}

// privileged records the privilege changer as a segment and analyses the
// command it runs. The inner command is found by the changer, which may use
// a secure_path of its own, so a bare name must resolve to the same file on
// the usual default paths as on the host PATH.
func (a *analyzer) privileged(base string, spec privilegeSpec, seg Segment, args []arg, st *cwdState, ctx cmdCtx) error {
	name := args[0]
	seg.Role = RolePrivilege
	a.add(seg, ctx)

	rest := args[1:]
	ws := &wrapState{}
	n, err := parseOpts(base, rest, spec.opts, ctx.tailOpen, func(k, v string) error { return spec.on(ws, k, v) })
	if err != nil {
		return err
	}
	if ws.noCommand {
		return nil
	}
	rest = rest[n:]
	if spec.envAssign {
		for len(rest) > 0 {
			if !rest[0].static {
				return failf("run-time value %s in the arguments of %s", rest[0].text, base)
			}
			k, _, ok := strings.Cut(rest[0].val, "=")
			if !ok {
				break
			}
			if k == "" || dangerousVar(k) {
				return failf("%s sets %s, which changes what runs", base, k).hint("dangerous environment variables cannot be set in a command")
			}
			a.noteEnv(k)
			rest = rest[1:]
		}
	}
	if len(rest) == 0 {
		if ctx.tailOpen {
			return failf("%s runs a command supplied at run time", base)
		}
		if spec.needsCommand {
			return failf("%s without a command starts a shell", base)
		}
		return nil
	}
	inner := ctx.startedBy(name.text, seg.ResolvedPath)
	inner.defaultPath = true
	return a.command(rest, st, inner)
}
