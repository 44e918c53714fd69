// Package shellcmd decides, statically and without running anything, which
// executables a command would run, so the allowlist can vouch for every one
// of them. It parses command text with mvdan.cc/sh/v3/syntax in its POSIX
// variant (execution hosts run the text with /bin/sh, which is dash, bash or
// another POSIX shell, so bash-only syntax is a parse error and therefore an
// analysis failure) and resolves each executed command to an absolute path.
//
// The analysis fails closed: anything whose effect cannot be known from the
// text alone makes Analysis.OK false, and callers treat that as an allowlist
// miss, never as an allow. The rules, in short:
//
//   - Every command that would execute is a Segment: lists (; && || & and
//     newlines), pipelines, negation, subshells, groups, and every branch of
//     if/while/until/for/case. Comments are ignored by the parser, so a
//     leading comment cannot hide a later line.
//   - Wrappers (env, nice, nohup, timeout, stdbuf, time, command, exec,
//     xargs, ionice, setsid, chrt, taskset) are looked through: the command
//     they run is the segment and the wrapper is recorded in Segment.Via.
//     Options that change what or how the inner command is found (env -S,
//     env -C, env -P, command -p, exec -a, time -o …) fail the analysis.
//     Other known command carriers (flock, watch, su, chroot, strace …) and
//     busybox/toybox applets cannot be looked through precisely and fail.
//   - Privilege changers (sudo, doas, run0, pkexec) are segments with
//     RolePrivilege and their inner command is a segment too; login, shell,
//     environment-preserving and editing modes fail.
//   - POSIX shells called with -c are looked through and their payload is
//     analysed recursively; login, interactive and rc-file modes fail, and so
//     does a payload that refers to positional parameters. A shell reading a
//     script file or standard input is itself the segment, with RoleShell.
//   - Interpreters (python, node, perl, awk, …) are ordinary segments with
//     RoleInterpreter: they must match, and are never recorded by
//     allow-always.
//   - Command, process and arithmetic-with-variables substitution, parameter
//     expansion, globs or brace expansion in a command position, assignment
//     expansions (${x=…}), redirections to or from anything but /dev/null or
//     a file descriptor, expanding here-documents that contain substitutions,
//     dangerous environment assignments (policy.DangerousEnv), function
//     definitions, builtins that change how later text executes (eval,
//     source, alias, trap, unset …) and every syntax node this package does
//     not handle explicitly all fail the analysis.
//   - Executables resolve against Env: path-qualified names against Env.Cwd
//     (updated by a literal cd) or Env.Home (~/), bare names against Env.PATH,
//     the host's PATH, never one supplied by a request. Empty and relative
//     PATH entries are skipped. ResolvedPath is cleaned but not
//     symlink-resolved, so patterns such as /opt/homebrew/bin/rg match the
//     path as found; RealPath is the symlink-resolved file.
//
// Recordable says which resolved paths allow-always may persist and why the
// others were left out.
package shellcmd
