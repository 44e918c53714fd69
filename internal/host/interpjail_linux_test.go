package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/confine"
	"github.com/exechost/exechost/internal/jail"
	"github.com/exechost/exechost/internal/policy"
)

// probeArg makes this test binary a probe that tries one escape and says
// whether the kernel let it (tests start it from a script an allowlist
// allows, so the guard lets it start and only the kernel can stop it).
const probeArg = "-exechost-test-probe"

func init() {
	if len(os.Args) == 4 && os.Args[1] == probeArg {
		if err := probe(os.Args[2], os.Args[3]); err != nil {
			fmt.Printf("refused: %v\n", err)
			os.Exit(1)
		}
		fmt.Println("ESCAPED")
		os.Exit(0)
	}
}

// probe tries one escape: write a file, chmod a file, connect a unix
// socket, send a UDP datagram, or read a file to stdout.
func probe(what, target string) error {
	switch what {
	case "write":
		return os.WriteFile(target, []byte("pwned\n"), 0o644)
	case "chmod":
		return os.Chmod(target, 0o666)
	case "unix":
		c, err := net.DialTimeout("unix", target, 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("ESCAPED\n"))
		return err
	case "udp":
		c, err := net.Dial("udp", target)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("ESCAPED"))
		return err
	case "read":
		b, err := os.ReadFile(target)
		os.Stdout.Write(b)
		return err
	}
	return fmt.Errorf("no probe %q", what)
}

// TestInterpretedRunInJail: text that needs the guarded interpreter (a
// loop, a list) starts in the standing jail as a direct start does, so
// what the interpreter starts cannot write outside its roots (a file in
// the home), chmod a file of the protected state directory, reach a unix
// socket in a socket directory (/run), send UDP to a listener on the
// host's loopback, or read a hidden secret (~/.ssh). Each escape is run
// for real by an allowlisted program (this binary as a probe, started from
// a script) and checked from outside; the control runs the same texts
// unconfined and every escape lands. The jailed runs name the jail's
// layers in their result and their finished audit record.
func TestInterpretedRunInJail(t *testing.T) {
	needABI(t, 4)
	if os.Geteuid() != 0 {
		t.Skip("the unix socket escape listens in /run, which only root may write")
	}
	for _, control := range []bool{false, true} {
		name := map[bool]string{false: "jailed", true: "control: unconfined"}[control]
		t.Run(name, func(t *testing.T) {
			j := newJailFixture(t, policy.SecurityAllowlist)
			script := filepath.Join(j.bin, "probe")
			if err := os.WriteFile(script, []byte("#!/bin/sh\nexec "+os.Args[0]+" "+probeArg+" \"$@\"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			if _, err := j.store.Update(func(f *approvals.File) error { f.AddPattern("*", script); return nil }); err != nil {
				t.Fatal(err)
			}
			j.engine.NoJail, j.engine.noConfine = control, control
			secret := filepath.Join(j.home, ".ssh", "id_ed25519")
			if err := os.WriteFile(secret, []byte("HIDDEN-SECRET\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			planted := filepath.Join(j.home, "docs", "planted")
			// A file of the state directory that the engine itself never
			// rewrites (it rewrites exec-approvals.json when it records
			// use, which would undo a chmod that landed).
			stateFile := filepath.Join(j.engine.StateDir, "victim.key")
			if err := os.WriteFile(stateFile, []byte("k"), 0o600); err != nil {
				t.Fatal(err)
			}
			sockPath := filepath.Join("/run", fmt.Sprintf("exechost-test-%d.sock", time.Now().UnixNano()))
			uln, err := net.Listen("unix", sockPath)
			if err != nil {
				t.Fatal(err)
			}
			defer uln.Close()
			udp, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer udp.Close()
			cases := []struct {
				name, text string
				landed     func(out string) bool
			}{
				{"write outside the roots", "for f in " + planted + "; do probe write $f; done", func(string) bool {
					_, err := os.Stat(planted)
					return err == nil
				}},
				{"chmod a state file", "true && probe chmod " + stateFile, func(string) bool {
					st, err := os.Stat(stateFile)
					return err == nil && st.Mode().Perm() != 0o600
				}},
				{"unix socket in /run", "true && probe unix " + sockPath, func(string) bool {
					_ = uln.(*net.UnixListener).SetDeadline(time.Now().Add(2 * time.Second))
					c, err := uln.Accept()
					if err != nil {
						return false
					}
					c.Close()
					return true
				}},
				{"UDP to a local listener", "true && probe udp " + udp.LocalAddr().String(), func(string) bool {
					_ = udp.SetReadDeadline(time.Now().Add(2 * time.Second))
					b := make([]byte, 64)
					n, _, err := udp.ReadFrom(b)
					return err == nil && string(b[:n]) == "ESCAPED"
				}},
				{"read a hidden secret", "probe read " + secret + "; true", func(out string) bool {
					return strings.Contains(out, "HIDDEN-SECRET")
				}},
			}
			for _, tc := range cases {
				req := Request{RawCommand: tc.text, Cwd: j.repo}
				p, err := j.engine.Prepare(req)
				if err != nil {
					t.Fatal(err)
				}
				if p.RunsAs() != RunsInterpreted {
					t.Fatalf("%s: runs as %s, want %s: the test proves nothing", tc.name, p.RunsAs(), RunsInterpreted)
				}
				res, err := j.engine.Run(context.Background(), req)
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				if landed := tc.landed(res.Stdout); landed != control {
					t.Errorf("%s: the escape landed = %v, want %v (%+v)", tc.name, landed, control, res.Result)
				}
				if jailed := slices.Contains(res.Layers, confine.LayerView); jailed == control {
					t.Errorf("%s: layers %v: jailed = %v, want %v", tc.name, res.Layers, jailed, !control)
				}
			}
			if control {
				return
			}
			j.mu.Lock()
			defer j.mu.Unlock()
			for _, a := range j.audits {
				if a.Event == "finished" && !slices.Contains(a.Layers, string(confine.LayerView)) {
					t.Errorf("a finished audit record of a jailed interpreted run lacks the view layer: %v", a.Layers)
				}
			}
		})
	}
}

// TestInterpretedMissingLayerFailsClosed: an interpreted run fails closed
// as a direct one does (TestMissingLayerFailsClosed). With the jail built
// without its pid layer, security=allowlist refuses the run and nothing
// ran; the control with unsupported: warn runs it in the jail that holds
// the rest, and its result names exactly those layers.
func TestInterpretedMissingLayerFailsClosed(t *testing.T) {
	needABI(t, 4)
	for _, warn := range []bool{false, true} {
		name := map[bool]string{false: "deny", true: "control: unsupported warn"}[warn]
		t.Run(name, func(t *testing.T) {
			j := newJailFixture(t, policy.SecurityAllowlist)
			if warn {
				j.setConfine(t, &approvals.Confine{Unsupported: string(confine.UnsupportedWarn)})
			}
			j.engine.JailLayers = slices.DeleteFunc(slices.Clone(jail.AllLayers), func(l confine.Layer) bool { return l == confine.LayerPID })
			target := filepath.Join(j.repo, "ran")
			req := Request{RawCommand: "true && marker " + target, Cwd: j.repo}
			if p, err := j.engine.Prepare(req); err != nil || p.RunsAs() != RunsInterpreted {
				t.Fatalf("prepare: %v; want an interpreted run: the test proves nothing", err)
			}
			res, err := j.engine.Run(context.Background(), req)
			_, statErr := os.Stat(target)
			ran := statErr == nil
			if !warn {
				if !errors.Is(err, confine.ErrUnsupported) || !strings.Contains(err.Error(), "pid") {
					t.Errorf("err %v, want confine.ErrUnsupported naming pid", err)
				}
				if ran {
					t.Error("the refused run ran")
				}
				return
			}
			if err != nil || !ran {
				t.Fatalf("with unsupported: warn: err %v, ran %v (%+v)", err, ran, res.Result)
			}
			if slices.Contains(res.Layers, confine.LayerPID) || !slices.Contains(res.Layers, confine.LayerView) {
				t.Errorf("the run's layers %v: want the view and no pid", res.Layers)
			}
		})
	}
}
