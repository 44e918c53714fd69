package cli

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/config"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/kubernetes"
	"github.com/exechost/exechost/internal/sandbox/pick"
	"github.com/exechost/exechost/internal/state"
)

func init() { register("sandbox", newSandboxCmd) }

func newSandboxCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Inspect the sandbox backends (host=sandbox)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newSandboxDoctorCmd(g), newSandboxImageCmd(g))
	return cmd
}

func newSandboxDoctorCmd(g *globals) *cobra.Command {
	var cfgPath string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Tell which sandbox backends work on this machine, and why not",
		Long: `Check each sandbox backend with the "sandbox" settings of exechost.json:
docker (is a daemon answering, is the image there, can the sandbox user
write /tmp in a probe container made as the backend makes them and removed
at once), the daemonless bwrap
backend (does a probe sandbox come up on this kernel, what isolation did it
get: namespaces, Landlock, limits) and, when configured, kubernetes (does
the namespace exist, may the gateway do what it needs, does the
RuntimeClass exist, does the API server admit the pod in a dry run, can
the node pull the images and start the agent in a probe pod, deleted at
once; and what the runtime walls off). It changes nothing of a running
gateway: no container or pod of its is created or removed. With a gateway
running on this machine for the state directory, the agent path described
is that gateway's binary's (found through the process listening on its
address), not this one's; the first line says whose. For each backend it says how commands run: through
a resident agent inside the sandbox (a static exechost, or a dynamically
linked one started through its own loader and libraries, carried in) or
one runtime call each (docker exec), and why; --json has it as "commands".

Exits 0 when the configured backend (or, for "auto", any backend) works,
1 when host=sandbox would fail.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := g.dir()
			if err != nil {
				return err
			}
			explicit := cfgPath != ""
			if !explicit {
				cfgPath = filepath.Join(dir, state.ConfigFile)
			}
			cfg, err := config.Load(cfgPath, !explicit)
			if err != nil {
				return err
			}
			whose := g.agentBinaryOf(&cfg.Sandbox)
			d, err := pick.Diagnose(cmd.Context(), cfg.Sandbox, dir)
			if err != nil {
				return err
			}
			if asJSON {
				if err := g.printJSON(d); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(g.stdout, whose)
				printDiagnosis(g, d)
			}
			if d.Selected == "" {
				if asJSON {
					return exitError{code: 1}
				}
				return hint.Wrap(errors.New("no sandbox backend works here: host=sandbox commands will fail"), "see the reasons above")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "config file (default <state>/exechost.json; optional there)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the diagnosis as JSON")
	return cmd
}

func newSandboxImageCmd(g *globals) *cobra.Command {
	var binary, push, output, tag, username string
	var plainHTTP bool
	cmd := &cobra.Command{
		Use:   "image (--push REGISTRY/REPOSITORY:TAG | --output FILE)",
		Short: "Build the Kubernetes agent image FROM scratch and push it",
		Long: `Build sandbox.kubernetes.agentImage: an image FROM scratch whose one
layer is a static exechost binary at /exechost (this executable, or
--binary), the same bytes for the same binary. --push uploads it to the
registry the reference names (the OCI distribution API; a loopback
registry is spoken to over HTTP, others over HTTPS unless --plain-http;
--username with $EXECHOST_REGISTRY_PASSWORD for one that needs a login).
--output writes it as an OCI image archive instead, for ` + "`docker load`" + `,
` + "`ctr images import`" + ` or a registry tool of your own. No Dockerfile, no
daemon. It prints the image's digest and the sandbox.kubernetes line that
uses it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (push == "") == (output == "") {
				return usageHint("`exechost sandbox image --push registry.example/exechost-agent:1`", "give exactly one of --push and --output")
			}
			if binary == "" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				binary = exe
			}
			im, err := kubernetes.BuildAgentImage(binary)
			if err != nil {
				return err
			}
			ref := push
			if push != "" {
				if _, err := im.Push(cmd.Context(), push, kubernetes.PushOptions{Username: username, Password: os.Getenv("EXECHOST_REGISTRY_PASSWORD"), PlainHTTP: plainHTTP}); err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "pushed %s (%s, %s)\n", push, im.Digest(), im.Arch)
			} else {
				ref = tag
				var buf bytes.Buffer
				if err := im.WriteArchive(&buf, tag); err != nil {
					return err
				}
				if err := os.WriteFile(output, buf.Bytes(), 0o644); err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "wrote %s: %s (%s, %s)\n", output, tag, im.Digest(), im.Arch)
			}
			fmt.Fprintf(g.stdout, "exechost.json: \"sandbox\": {\"backend\": \"kubernetes\", \"kubernetes\": {\"agentImage\": %q}}\n", ref)
			return nil
		},
	}
	cmd.Flags().StringVar(&binary, "binary", "", "static exechost binary to put in the image (default: this executable)")
	cmd.Flags().StringVar(&push, "push", "", "push to this REGISTRY/REPOSITORY:TAG")
	cmd.Flags().StringVar(&output, "output", "", "write an OCI image archive to this file instead")
	cmd.Flags().StringVar(&tag, "tag", "exechost.local/exechost-agent:latest", "the image name recorded in the --output archive")
	cmd.Flags().StringVar(&username, "username", "", "registry user (password from $EXECHOST_REGISTRY_PASSWORD)")
	cmd.Flags().BoolVar(&plainHTTP, "plain-http", false, "talk HTTP to a registry that is not on loopback")
	return cmd
}

func printDiagnosis(g *globals, d pick.Diagnosis) {
	sel := d.Selected
	if sel == "" {
		sel = "none"
	}
	fmt.Fprintf(g.stdout, "sandbox.backend: %s (would use: %s)\n", d.Configured, sel)
	for _, s := range d.Backends {
		state := "unavailable"
		if s.Available {
			state = "available"
		}
		fmt.Fprintf(g.stdout, "\n%s: %s: %s\n", s.Name, state, s.Detail)
		said := false
		for _, line := range s.Isolation {
			fmt.Fprintf(g.stdout, "  - %s\n", line)
			said = said || strings.HasPrefix(line, "commands:")
		}
		if s.Commands != nil && !said {
			// How commands would run once the backend is available.
			fmt.Fprintf(g.stdout, "  - commands: %s\n", s.Commands)
		}
	}
}

// agentBinaryOf points sc at the binary the running gateway would start
// as the sandbox agent — its own executable, found through the process
// listening on the gateway's loopback address — so doctor describes that
// gateway's agent path, not the path of whatever exechost runs doctor
// (an older install, a `go run` build). It returns the sentence saying
// whose binary is described. sandbox.agentBinary, when set, wins, as it
// does in the gateway.
func (g *globals) agentBinaryOf(sc *sandbox.Config) string {
	if sc.AgentBinary != "" {
		return "agent binary: " + sc.AgentBinary + " (sandbox.agentBinary)"
	}
	self, _ := os.Executable()
	url, err := g.gatewayURL(DefaultGateway)
	if err != nil {
		return "agent binary: this one, " + self + ": " + err.Error()
	}
	addr, err := loopbackAddr(url)
	if err != nil {
		return "agent binary: this one, " + self + ": " + err.Error()
	}
	pid, exe, err := gatewayProcess(addr)
	if err != nil {
		return fmt.Sprintf("agent binary: this one, %s (no running gateway found on %s: %v; a gateway started from this binary would use it)", self, addr, err)
	}
	sc.AgentBinary = exe
	return fmt.Sprintf("agent binary: the running gateway's, %s (pid %d, listening on %s)", exe, pid, addr)
}

// loopbackAddr is the address of a gateway URL on this machine, or why
// it is not one.
func loopbackAddr(url string) (netip.AddrPort, error) {
	hostport := url
	for _, p := range []string{"ws://", "wss://", "http://", "https://"} {
		hostport = strings.TrimPrefix(hostport, p)
	}
	hostport, _, _ = strings.Cut(hostport, "/")
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("gateway URL %s: %w", url, err)
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	addr, err := netip.ParseAddrPort(net.JoinHostPort(host, port))
	if err != nil || !addr.Addr().IsLoopback() {
		return netip.AddrPort{}, fmt.Errorf("the gateway %s is not on this machine's loopback", url)
	}
	return addr, nil
}
