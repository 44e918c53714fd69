package shellcmd

import (
	"path"
	"strings"
)

// shellFlags are single-letter shell options that change error handling or
// tracing only; "r" (restricted) and "B" (brace expansion, which the
// analysis rejects in command positions anyway) are harmless too.
const shellFlags = "abCefhnuvxrB"

// shellLong are bash's long options that never make the shell read files or
// run anything more.
var shellLong = map[string]bool{
	"--norc": true, "--noprofile": true, "--posix": true, "--noediting": true,
	"--restricted": true, "--verbose": true,
}

// shell looks through a POSIX shell: a -c payload is analysed as command
// text; a shell reading a script file or standard input is itself the
// segment, with RoleShell. Login, interactive and rc-file modes fail: they
// run files the analysis never sees.
func (a *analyzer) shell(args []arg, seg Segment, st *cwdState, ctx cmdCtx) error {
	name := args[0]
	// The shell's own program runs: it is a segment that must match (and is
	// never recorded), whatever its payload.
	seg.Role = RoleShell
	a.add(seg, ctx)
	prog := path.Base(name.val)
	cmdMode, stdinMode := false, false
	i := 1
loop:
	for ; i < len(args); i++ {
		x := args[i]
		if !x.static {
			return failf("run-time value %s in the arguments of %s", x.text, prog)
		}
		v := x.val
		switch {
		case v == "--" || v == "-":
			i++
			break loop
		case strings.HasPrefix(v, "--"):
			if !shellLong[v] {
				return failf("%s %s is not supported", prog, v).hint("login shells and rc files run files the analysis never sees")
			}
		case len(v) > 1 && (v[0] == '-' || v[0] == '+'):
			for j := 1; j < len(v); j++ {
				c := v[j]
				switch {
				case c == 'c' && v[0] == '-':
					cmdMode = true
				case c == 's' && v[0] == '-':
					stdinMode = true
				case c == 'o':
					i++
					if i >= len(args) || !args[i].static || !(interpOptions[args[i].val] || args[i].val == "posix") {
						return failf("%s %co with an option that is not known to be harmless", prog, v[0])
					}
				case c == 'l' || c == 'i':
					return failf("%s -%c runs login or rc files the analysis never sees", prog, c).hint("drop -%c", c)
				case strings.IndexByte(shellFlags, c) >= 0:
				default:
					return failf("%s option %c%c is not supported", prog, v[0], c)
				}
			}
		default:
			break loop
		}
	}
	if cmdMode && !stdinMode {
		if i >= len(args) {
			if ctx.tailOpen {
				return failf("%s -c receives its command at run time", prog)
			}
			return failf("%s -c without a command", prog)
		}
		payload := args[i]
		if !payload.static {
			return failf("%s -c with a run-time payload (%s)", prog, payload.text)
		}
		positional := i+1 < len(args) || ctx.tailOpen
		if err := a.text(payload.val, *st, ctx.startedBy(name.text, seg.ResolvedPath), positional, false); err != nil {
			return within("in "+prog+" -c payload: ", err)
		}
		return nil
	}
	if i >= len(args) && ctx.tailOpen {
		return failf("%s receives its arguments at run time", prog)
	}
	// A script file or standard input: the shell's segment is all there is.
	return nil
}
