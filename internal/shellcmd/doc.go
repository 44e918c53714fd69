// Package shellcmd decides, statically and without running anything, which
// executables a command would run, so that the allowlist can vouch for
// every one of them.
//
// Command text is parsed with mvdan.cc/sh/v3/syntax in its POSIX variant
// (Parse), printed back in canonical form and parsed again (Canonical): the
// analysis walks the parse of the canonical form, and the execution host
// runs exactly that form in the interpreter of package shellrun, which
// parses the same bytes with the same function and refuses at run time
// anything the analysis did not allow. What was analysed is what runs;
// /bin/sh never reads text this package vouched for. Bash-only syntax
// ([[ ]], arrays, <(…), &>, <<<, function …) is a parse error and therefore
// an analysis failure. runs.go holds what the analysis and the interpreter
// must agree on, each decided once: the parser, the vouched builtins
// (BuiltinRefusal), the wrappers the runner applies (ParseApplied), the
// shell invocations it interprets (ParseShellCall) and resolution
// (Resolve).
//
// The analysis fails closed: anything whose effect cannot be known from the
// text alone makes Analysis.OK false, and callers treat that as a miss,
// never as an allow. Why it failed is a *Failure (Analysis.Failure): the
// construct, its position and the hint as fields, so a caller (a denial's
// explanation) never reads them back out of the message. The rules:
//
//   - Every command that would execute is a Segment: lists (; && || & and
//     newlines), pipelines, negation, subshells, groups, and every branch of
//     if/while/until/for/case. Comments are not commands; a comment ending
//     in a backslash, a carriage return anywhere, and a here-document line
//     ending in a backslash fail, because there the parser and the shells
//     disagree about where the next command starts.
//   - Command and process substitution (also inside double quotes,
//     parameter defaults, arithmetic and expanding here-documents), $[…],
//     arithmetic naming a variable (bash evaluates variable contents and
//     array subscripts), assignment expansions ${x=…} and ${x:=…}, $'…' and
//     $"…", function definitions, coprocesses and every syntax node not
//     handled explicitly fail.
//   - In a command position (the command name, and every word a wrapper
//     interprets) a word must be literal: parameter expansion, globs, brace
//     expansion, ~user and bash assignment forms (a[i]=, x+=) fail. In
//     arguments they are data.
//   - Redirections may only target /dev/null or file descriptors (2>&1,
//     <&-); quoted and non-substituting here-documents are fine.
//   - Assigning a dangerous variable (policy.DangerousEnv, the shell's state
//     variables such as PWD, FPATH, EXECIGNORE, and every BASH* variable)
//     fails, as a prefix, standalone, through export/readonly, env or sudo.
//   - Builtins (every name the interpreter treats as one, IsBuiltin) run
//     inside the interpreter and are not segments; only the vouched ones are
//     accepted (BuiltinRefusal): true, false, :, cd, pwd, echo, printf
//     without -v, test and [ without -v/-R, type, command, exec, exit,
//     return, break, continue, shift, wait, set with error and tracing
//     options, export/readonly of plain safe names. Every other builtin
//     (eval, source, ., alias, trap, unset, read, kill, jobs, …) fails. cd to
//     a literal existing directory updates the directory used for later
//     relative names (after "cd d &&"; after "cd d;", in a branch or
//     pipeline the directory becomes uncertain and a later relative command
//     path fails; cd in a loop fails).
//   - Wrappers: env, nice, nohup, timeout and time by bare name are applied
//     by the runner (ParseApplied; Segment.Applied), so no program of theirs
//     runs and the command they wrap is the segment. Every other wrapper
//     (xargs, stdbuf, setsid, ionice, chrt, taskset, a wrapper named by path,
//     an applied one with options the runner does not implement) runs its
//     own program: a segment with RoleWrapper, and, when it is the host's
//     real tool, the command it runs is a segment too (Segment.StartedBy).
//     Options that change how the inner command is found or run fail (env
//     -S/-C/-P, command -p, exec -a, time -o, …), as does every option not
//     known. command -v runs nothing.
//     xargs appends run-time arguments, so the command it runs may not be a
//     wrapper or shell that would read them as options or code; with -I the
//     words holding the replacement are run-time values. Other command
//     carriers (flock, watch, su, chroot, strace …) and busybox/toybox
//     applet calls fail.
//   - Privilege changers (sudo, doas, run0, pkexec) are segments with
//     RolePrivilege, and the command they run is a segment too; login,
//     shell, environment-preserving, editing and chdir modes fail.
//   - sh, bash, dash and ash -c TEXT (bare or in a system directory, with
//     options the interpreter implements) are interpreted (ParseShellCall):
//     the payload is analysed recursively and no shell starts. Any other
//     POSIX shell called with -c is a RoleShell segment whose payload is
//     analysed recursively; -l, -i,
//     --login, --rcfile and unknown options fail, and so does a payload that
//     refers to positional parameters when arguments follow it. A shell
//     reading a script file or standard input is itself the segment, with
//     RoleShell, as are non-POSIX shells (fish, csh, pwsh, …).
//   - Interpreters (python*, node, perl, ruby, php, lua, awk, tclsh,
//     Rscript, osascript, deno, bun, java, …) are segments with
//     RoleInterpreter: they must match and are never recorded.
//   - Resolution: path-qualified names resolve against Env.Cwd (or the
//     directory a literal cd moved to) and ~/ against Env.Home, bare names
//     against Env.PATH, the host's PATH. Empty and relative PATH entries are
//     never used, and if one comes before the match and holds the name the
//     analysis fails. ResolvedPath is cleaned but not symlink-resolved, so a
//     pattern such as /opt/homebrew/bin/rg matches the path as found;
//     RealPath is the symlink-resolved file. A name that does not resolve to
//     a regular executable file gives a segment with an empty ResolvedPath
//     (a miss). ".." through a symlink fails. When the program that finds
//     the command may use another search path (env -i, sudo's secure_path,
//     pkexec, run0), a bare name must resolve to the same file on the usual
//     default paths.
//   - Wrappers and shells are classified by the name written and, failing
//     that, by the file it resolves to, so a symlink ~/bin/e -> env is still
//     env; one that is not the host's real tool (./env) is an ordinary
//     program that must match.
//
// Those are the strict rules. When the execution host says the run's walls
// hold (Env.Contained: the guarded interpreter runs the text, confined by a
// jail that builds with every layer), the contained rules accept what the
// walls contain: $(…) in argument position and as cd's operand (its
// commands are segments; the guard checks every start inside it), cd to a
// run-time directory (which then is unknown), a redirection reading a
// literal path, and one writing a literal path beneath a writable root and
// outside the read-only paths (Contained). Analysis.Contained lists what
// was accepted that way; everything else keeps the strict rules.
//
// Recordable says which resolved paths allow-always may persist (exact
// paths of ordinary commands only) and why the others were left out.
//
// Analyze and the interpreter must stay in agreement: the tests run every
// corpus text through the real binary under strace (trace_linux_test.go),
// compare the interpreter with dash on generated commands
// (fidelity_unix_test.go), and fuzz the interpreter as nobody
// (FuzzInterpreterRunsOnlyAnalysed).
package shellcmd
