package shellcmd

import (
	"strings"
	"testing"
)

func TestWrappersAreLookedThrough(t *testing.T) {
	runOK(t, []okCase{
		{"env ls", []string{"BIN/ls via=env"}},
		{"env FOO=1 BAR=2 ls -l", []string{"BIN/ls via=env"}},
		{"env -u FOO ls", []string{"BIN/ls via=env"}},
		{"env -uFOO -- ls", []string{"BIN/ls via=env"}},
		{"env --unset=FOO ls", []string{"BIN/ls via=env"}},
		{"env -i mytool", []string{"BIN/mytool via=env"}},
		{"env - mytool", []string{"BIN/mytool via=env"}},
		{"env --ignore-environment mytool", []string{"BIN/mytool via=env"}},
		{"env", []string{"BIN/env wrapper"}},
		{"env --help", []string{"BIN/env wrapper"}},
		{"nice ls", []string{"BIN/ls via=nice"}},
		{"nice -n 5 ls", []string{"BIN/ls via=nice"}},
		{"nice -n5 ls", []string{"BIN/ls via=nice"}},
		{"nice -10 ls", []string{"BIN/ls via=nice"}},
		{"nice --adjustment=3 ls", []string{"BIN/ls via=nice"}},
		{"nohup ls", []string{"BIN/ls via=nohup"}},
		{"nohup -- ls", []string{"BIN/ls via=nohup"}},
		{"timeout 5 ls", []string{"BIN/ls via=timeout"}},
		{"timeout -s KILL -k 2 5s ls", []string{"BIN/ls via=timeout"}},
		{"timeout --signal=TERM --preserve-status 1m ls", []string{"BIN/ls via=timeout"}},
		{"stdbuf -oL ls", []string{"BIN/stdbuf wrapper", "BIN/ls via=stdbuf"}},
		{"stdbuf -o L -e0 ls", []string{"BIN/stdbuf wrapper", "BIN/ls via=stdbuf"}},
		{"stdbuf --output=L ls", []string{"BIN/stdbuf wrapper", "BIN/ls via=stdbuf"}},
		{"time ls", []string{"BIN/ls via=time"}},
		{"time -p ls", []string{"BIN/ls via=time"}},
		{"BIN/time -v ls", []string{"BIN/time wrapper", "BIN/ls via=BIN/time"}},
		{"command ls", []string{"BIN/ls via=command"}},
		{"command -- ls", []string{"BIN/ls via=command"}},
		{"command -v ls", nil},

		{"exec ls", []string{"BIN/ls via=exec"}},
		{"xargs rm", []string{"BIN/xargs wrapper", "BIN/rm via=xargs"}},
		{"xargs -0 -n 1 -P4 rm -f", []string{"BIN/xargs wrapper", "BIN/rm via=xargs"}},
		{"xargs", []string{"BIN/xargs wrapper", "BIN/echo via=xargs"}},
		{"xargs -I{} mytool {}", []string{"BIN/xargs wrapper", "BIN/mytool via=xargs"}},
		{"xargs -I % sh -c 'ls'", []string{"BIN/xargs wrapper", "BIN/sh shell via=xargs", "BIN/ls via=xargs,sh"}},
		{"xargs --max-args=2 --null rm", []string{"BIN/xargs wrapper", "BIN/rm via=xargs"}},
		{"ionice -c3 ls", []string{"BIN/ionice wrapper", "BIN/ls via=ionice"}},
		{"ionice -c 2 -n 7 ls", []string{"BIN/ionice wrapper", "BIN/ls via=ionice"}},
		{"ionice -p 123", []string{"BIN/ionice wrapper"}},
		{"setsid ls", []string{"BIN/setsid wrapper", "BIN/ls via=setsid"}},
		{"setsid -f -w ls", []string{"BIN/setsid wrapper", "BIN/ls via=setsid"}},
		{"chrt -f 10 ls", []string{"BIN/chrt wrapper", "BIN/ls via=chrt"}},
		{"chrt --other 0 ls", []string{"BIN/chrt wrapper", "BIN/ls via=chrt"}},
		{"chrt -o ls", []string{"BIN/chrt wrapper", "BIN/ls via=chrt"}},
		{"chrt -p 10 123", []string{"BIN/chrt wrapper"}},
		{"taskset 0x3 ls", []string{"BIN/taskset wrapper", "BIN/ls via=taskset"}},
		{"taskset -c 0-3 ls", []string{"BIN/taskset wrapper", "BIN/ls via=taskset"}},
		{"nice nohup timeout 5 env FOO=1 ls", []string{"BIN/ls via=nice,nohup,timeout,env"}},
		{"env nice ls && timeout 1 rm x", []string{"BIN/ls via=env,nice", "BIN/rm via=timeout"}},
		{"HOME/bin/e ls", []string{"HOME/bin/e wrapper", "BIN/ls via=HOME/bin/e"}},
		// Through an external wrapper, names are programs, not builtins.
		{"env cd /", []string{"- via=env"}},
		{"nice eval x", []string{"- via=nice"}},
	})
}

func TestWrappersThatMustFail(t *testing.T) {
	runFail(t, []failCase{
		{"env -S 'rm -rf x'", "env -S splits a string"},
		{"env -vS'rm x'", "env -S"},
		{"env --split-string='rm x'", "env --split-string"},
		{"env --spl='rm x'", "env --spl"},
		{"env -C /tmp ls", "env -C changes directory"},
		{"env --chdir=/tmp ls", "env --chdir"},
		{"env -P /tmp ls", "env -P"},
		{"env LD_PRELOAD=/x.so ls", "env sets LD_PRELOAD"},
		{"env -i PATH=/tmp ls", "env sets PATH"},
		{"env =x ls", "env sets"},
		{"env $VARS ls", "run-time value"},
		{"env -i ls", "does not use the host PATH"},
		{"env --frobnicate ls", "unknown option --frobnicate"},
		{"nice -n $N ls", "run-time value $N"},
		{"timeout $T ls", "run-time value $T"},
		{"time -o out ls", "time -o writes a file"},
		{"time --output=out ls", "writes a file"},
		{"command -p ls", "command -p is not supported"},
		{"command -V rm", "command -V is not supported"},
		{"exec -a name ls", "unknown option -a"},
		{"exec -c ls", "unknown option -c"},
		{"xargs env", "run time"},
		{"xargs nice", "run time"},
		{"xargs sh", "run time"},
		{"xargs sh -c", "run time"},
		{"xargs timeout", "run time"},
		{"xargs sh -c 'echo \"$@\"'", "refers to $@"},
		{"xargs -I{} {}", "command position"},
		{"xargs -I{} sh -c '{}'", "run-time value"},
		{"xargs -I{} env {} ls", "run-time value"},
		{"xargs --process-slot-var=LD_PRELOAD ls", "process-slot-var"},
		{"xargs -E", "requires a value"},
		{"busybox rm -rf x", "busybox applets cannot be allowlisted precisely"},
		{"BIN/busybox sh -c ls", "busybox applets"},
		{"toybox ls", "toybox applets"},
		{"busybox", "busybox applets"},
		{"env busybox ls", "busybox applets"},
		{"flock /tmp/l rm x", "flock runs a command"},
		{"watch ls", "watch runs its command through sh -c"},
		{"strace ls", "strace runs a command"},
		{"nice flock x ls", "flock"},
	})
}

func TestUntrustedWrapperIsAnOrdinaryCommand(t *testing.T) {
	// ./env is not the host's env: it is the program that runs, so it must
	// match, and the words after it are its data.
	runOK(t, []okCase{
		{"./env rm -rf x", []string{"WORK/env"}},
		{"WORK/env rm -rf x", []string{"WORK/env"}},
	})
}

func TestPrivilegeChangers(t *testing.T) {
	runOK(t, []okCase{
		{"sudo mytool", []string{"BIN/sudo privilege", "BIN/mytool via=sudo"}},
		{"sudo -u root -n mytool -x", []string{"BIN/sudo privilege", "BIN/mytool via=sudo"}},
		{"sudo --user=root FOO=1 mytool", []string{"BIN/sudo privilege", "BIN/mytool via=sudo"}},
		{"sudo BIN/ls", []string{"BIN/sudo privilege", "BIN/ls via=sudo"}},
		{"sudo -v", []string{"BIN/sudo privilege"}},
		{"sudo -l", []string{"BIN/sudo privilege"}},
		{"sudo BIN/nice mytool", []string{"BIN/sudo privilege", "BIN/nice wrapper via=sudo", "BIN/mytool via=sudo,BIN/nice"}},
		{"sudo BIN/sh -c 'mytool; BIN/rm x'", []string{"BIN/sudo privilege", "BIN/sh shell via=sudo", "BIN/mytool via=sudo,BIN/sh", "BIN/rm via=sudo,BIN/sh"}},
		{"doas mytool", []string{"BIN/doas privilege", "BIN/mytool via=doas"}},
		{"doas -u root mytool", []string{"BIN/doas privilege", "BIN/mytool via=doas"}},
		{"run0 --user=root mytool", []string{"BIN/run0 privilege", "BIN/mytool via=run0"}},
		{"pkexec --user root mytool", []string{"BIN/pkexec privilege", "BIN/mytool via=pkexec"}},
		{"sudo eval x", []string{"BIN/sudo privilege", "- via=sudo"}},
		{"env sudo mytool", []string{"BIN/sudo privilege via=env", "BIN/mytool via=env,sudo"}},
	})
	runFail(t, []failCase{
		{"sudo -i", "sudo -i runs a login shell"},
		{"sudo -s", "sudo -s runs a shell"},
		{"sudo -E mytool", "keeps the caller's environment"},
		{"sudo --preserve-env=PATH mytool", "keeps the caller's environment"},
		{"sudo --login", "login shell"},
		{"sudo -e /etc/hosts", "edits files"},
		{"sudo -D /tmp mytool", "changes directory"},
		{"sudo -R /tmp mytool", "changes the root"},
		{"sudo -h otherhost mytool", "sudo -h"},
		{"sudo LD_PRELOAD=/x mytool", "sudo sets LD_PRELOAD"},
		{"sudo ls", "does not use the host PATH"},
		{"sudo $CMD", "run-time value $CMD"},
		{"sudo nice mytool", "does not use the host PATH"},
		{"sudo BIN/sh -c ls", "does not use the host PATH"},
		{"env -i BIN/sh -c 'ls'", "does not use the host PATH"},
		{"doas -s", "runs a shell"},
		{"doas", "starts a shell"},
		{"pkexec", "starts a shell"},
		{"run0", "starts a shell"},
		{"run0 --setenv=A=1 mytool", "sets environment variables"},
		{"xargs sudo", "run time"},
	})
}

// TestClassifyByTable checks classify's one-lookup table against the
// tables themselves, in classify's order, for every name they list and
// its versioned, upper-cased and unknown variants.
func TestClassifyByTable(t *testing.T) {
	byTables := func(base string) programKind {
		if _, ok := wrappers[base]; ok && !shellBuiltinWrappers[base] {
			return kindWrapper
		}
		if _, ok := privilegeChangers[base]; ok {
			return kindPrivilege
		}
		if carriers[base] != "" {
			return kindCarrier
		}
		if posixShells[base] {
			return kindPOSIXShell
		}
		if otherShells[base] {
			return kindShell
		}
		b := strings.TrimSuffix(strings.TrimRight(strings.ToLower(base), "0123456789."), "-")
		if interpreters[b] {
			return kindInterpreter
		}
		return kindNone
	}
	var names []string
	for n := range wrappers {
		names = append(names, n)
	}
	for n := range privilegeChangers {
		names = append(names, n)
	}
	for n := range carriers {
		names = append(names, n)
	}
	for _, m := range []map[string]bool{posixShells, otherShells, interpreters, shellBuiltinWrappers} {
		for n := range m {
			names = append(names, n)
		}
	}
	for _, n := range append(names, "git", "ls", "", "-", "3", "x.1") {
		for _, v := range []string{n, n + "3", n + "3.12", n + "-2", strings.ToUpper(n), n + "x"} {
			if got, want := classify(v), byTables(v); got != want {
				t.Errorf("classify(%q) = %v, the tables say %v", v, got, want)
			}
		}
	}
}
