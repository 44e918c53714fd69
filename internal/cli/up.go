package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	neturl "net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gofrs/flock"
	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/atomicfile"
	"github.com/exechost/exechost/internal/config"
	"github.com/exechost/exechost/internal/gateway"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/node"
	"github.com/exechost/exechost/internal/nodekey"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/state"
)

func init() { register("up", newUpCmd) }

// upConfig is the embedded configuration of `exechost up` when the state
// directory has no exechost.json: commands go to the local node, whose own
// approvals decide; a miss asks the human.
func upConfig(listen string) *config.Config {
	c := config.Default()
	c.Tools.Exec = config.Exec{Host: string(policy.HostNode), Security: string(policy.SecurityAllowlist), Ask: string(policy.AskOnMiss)}
	c.Gateway.Listen = listen
	return c
}

func newUpCmd(g *globals) *cobra.Command {
	var listen, web string
	var noApprover bool
	var lf logFlags
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Quick start: a gateway, a paired local node and the approver web UI, on loopback",
		Long: `Start everything needed to try exechost on one machine, on loopback only:
a gateway (embedded config: host=node, security=allowlist, ask=on-miss,
unless <state>/exechost.json exists), a node runner paired with it
automatically, and the approver (web UI and prompts in this terminal).

A fresh state directory gets an exec-approvals.json with security=allowlist,
ask=on-miss and askFallback=deny: nothing runs until it is allowlisted or
approved. Ctrl-C stops everything.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return g.runUp(ctx, cmd, listen, web, noApprover, lf)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", upListenDefault(), "gateway listen address (loopback; default from $"+EnvGateway+" when set)")
	cmd.Flags().StringVar(&web, "web", "127.0.0.1:18790", "approver web UI address (loopback)")
	cmd.Flags().BoolVar(&noApprover, "no-approver", false, "do not start the approver (askFallback decides)")
	lf.addInsecure(cmd)
	lf.addWarm(cmd)
	cmd.Flags().StringVar(&lf.format, "log-format", "text", "log format: text or json")
	cmd.Flags().StringVar(&lf.level, "log-level", "warn", "log level: debug, info, warn or error")
	return cmd
}

// upLockFile in the state directory is held while `exechost up` runs.
const upLockFile = "up.lock"

// Bounds of `exechost up`'s start-up waits. They are deadlines: a healthy
// start takes well under a second.
const (
	// upConnectTimeout bounds the wait for the local node to be
	// connected (and, on the first run, paired).
	upConnectTimeout = 30 * time.Second
	// upWebTimeout bounds the wait for the approver's web UI URL once the
	// node is connected.
	upWebTimeout = 10 * time.Second
)

// runUp starts the gateway, then the local node and the approver, waits
// until the node is connected, and prints the summary. It is idempotent
// on a state directory: the node paired on the first run (node.json) is
// reused and simply reconnects on every later one.
// upListenDefault is where `up` listens by default: the host:port of
// $EXECHOST_GATEWAY when it names a ws:// URL (so every client command's
// default finds it), else config.DefaultListen.
func upListenDefault() string {
	if u, err := neturl.Parse(os.Getenv(EnvGateway)); err == nil && u.Scheme == "ws" && u.Host != "" {
		return u.Host
	}
	return config.DefaultListen
}

func (g *globals) runUp(parent context.Context, cmd *cobra.Command, listen, web string, noApprover bool, lf logFlags) error {
	tmp := upTempBuild()
	if tmp != nil {
		printTempBuild(g, tmp)
	}
	dir, err := g.dir()
	if err != nil {
		return err
	}
	if err := state.Ensure(dir); err != nil {
		return err
	}
	// One `up` per state directory: a second would start a second
	// gateway and a second copy of the same node on the same files.
	lock := flock.New(filepath.Join(dir, upLockFile))
	locked, err := lock.TryLock()
	if err != nil {
		return fmt.Errorf("lock %s: %w", lock.Path(), err)
	}
	if !locked {
		return hint.Wrap(fmt.Errorf("another `exechost up` is already running on %s", dir), "use that one — its summary has the URLs — or stop it with Ctrl-C; for a second, separate setup pass --state-dir OTHER")
	}
	defer lock.Unlock()
	fresh, err := ensureUpApprovals(dir)
	if err != nil {
		return err
	}
	cfgState, err := ensureUpConfig(dir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(parent)
	defer cancel()

	var wg sync.WaitGroup
	errc := make(chan error, 3)
	ready := make(chan string, 1)
	connected := make(chan string, 1)
	webURL := make(chan string, 1)
	gwc := make(chan *gateway.Gateway, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := g.runGateway(ctx, "", listen, lf, func(url string, gw *gateway.Gateway) {
			gwc <- gw
			ready <- url
		}, upConfig(listen))
		errc <- g.upGatewayErr(ctx, listen, err)
	}()
	var url string
	var gw *gateway.Gateway
	select {
	case url = <-ready:
		gw = <-gwc
		url = localURL(url) // a gateway on 0.0.0.0 is reached on loopback here
	case err := <-errc:
		return err
	case <-ctx.Done():
		wg.Wait()
		return nil
	}
	mcpCred, err := ensureUpAgentCredential(dir, url) // credentials.go
	if err != nil {
		cancel()
		wg.Wait()
		return fmt.Errorf("issue the MCP clients' agent credential: %w", err)
	}
	// The local node's token was issued by this state directory's gateway,
	// which runs right here; only its port may differ from the last run
	// (--listen 127.0.0.1:0). Point the identity at it so the node keeps
	// its pairing instead of dropping the token and pairing again.
	if id, err := node.LoadIdentity(dir); err == nil && id.Token != "" && id.Gateway.URL != url {
		id.Gateway.URL, id.Gateway.PublicKey = url, gw.PublicKey()
		if err := id.Save(dir); err != nil {
			cancel()
			wg.Wait()
			return fmt.Errorf("update the local node's gateway URL: %w", err)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		hooks := nodeHooks{
			// A node without a token (the first run) waits as pending:
			// it is ours, in this process, on loopback, so approve it
			// here instead of asking the user to.
			pending: func(id string) {
				if err := approveLocalNode(ctx, gw, id); err != nil {
					errc <- fmt.Errorf("auto-pairing the local node %s: %w", id, err)
				}
			},
			// Every run, first or not, waits for this: the node is
			// paired and its connection is up.
			paired: func(id string) {
				select {
				case connected <- id:
				default:
				}
			},
		}
		// up's own node shares this state directory with its gateway: the
		// gateway widening its file is the same person editing the file
		// here, so the denial's `--node` fix works as printed. A node on
		// another machine must opt in itself (--allow-remote-widening).
		err := g.runNode(ctx, nodeRunFlags{url: url, log: lf, allowRemoteWidening: true}, hooks)
		if err != nil {
			errc <- hint.Wrap(fmt.Errorf("local node: %w", err), fmt.Sprintf("if its pairing was removed, delete %s and run `exechost up` again: it pairs a new node", filepath.Join(dir, state.NodeFile)))
		}
	}()
	if !noApprover {
		g.onWebURL = func(u string) { webURL <- u }
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := runApprover(ctx, g, approverFlags{In: cmd.InOrStdin(), Web: web})
			switch {
			case err == nil || ctx.Err() != nil:
			case errors.Is(err, syscall.EADDRINUSE):
				errc <- hint.Wrap(fmt.Errorf("the approver web UI's address %s is already in use, probably by another `exechost up` or `exechost approver --web`", web), "stop it, or pass --web 127.0.0.1:0 for a free port")
			default:
				errc <- fmt.Errorf("approver: %w", err)
			}
		}()
	}
	fail := func(err error) error {
		cancel()
		wg.Wait()
		return err
	}
	connectBy := time.NewTimer(upConnectTimeout)
	defer connectBy.Stop()
	var nodeID string
	select {
	case nodeID = <-connected:
	case err := <-errc:
		return fail(err)
	case <-connectBy.C:
		return fail(hint.Wrap(fmt.Errorf("the local node did not connect within %s", upConnectTimeout), "rerun with --log-level info"))
	case <-ctx.Done():
		wg.Wait()
		return nil
	}
	approverURL := ""
	if !noApprover {
		webBy := time.NewTimer(upWebTimeout)
		defer webBy.Stop()
		select {
		case approverURL = <-webURL:
		case err := <-errc:
			return fail(err)
		case <-webBy.C:
			return fail(hint.Wrap(fmt.Errorf("the approver's web UI did not start within %s", upWebTimeout), "rerun with --log-level info, or --no-approver"))
		case <-ctx.Done():
			wg.Wait()
			return nil
		}
	}
	printUpNext(g, upSummary{dir: dir, url: url, approverURL: approverURL, nodeID: nodeID, fresh: fresh, config: cfgState, noApprover: noApprover, exe: exechostCommand(tmp), tmp: tmp != nil, mcpCredential: mcpCred})
	// The explanation of the created defaults has been shown: a later
	// run keeps the file and says so.
	if err := upShown(dir); err != nil {
		return fail(err)
	}
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	fmt.Fprintln(g.stdout, "exechost: stopped")
	return err
}

// approveLocalNode pairs the node `up` started itself. The node hears
// "pending" as the gateway files it, so it retries briefly until the
// gateway lists it.
func approveLocalNode(ctx context.Context, gw *gateway.Gateway, id string) error {
	const (
		attempts = 100
		pause    = 50 * time.Millisecond
	)
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var err error
	for range attempts {
		if _, err = gw.Approve(actx, id); err == nil {
			return nil
		}
		t := time.NewTimer(pause)
		select {
		case <-actx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
	return err
}

// upGatewayErr explains why the gateway of `up` stopped; a port held by
// something else gets a sentence that says what and what to do.
func (g *globals) upGatewayErr(ctx context.Context, listen string, err error) error {
	if err == nil {
		return nil
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		return gatewayErr(err)
	}
	what := "another program"
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ours := false
	if a, aerr := g.clientAuth(); aerr == nil {
		if c, derr := g.dialGatewayAt(pctx, "ws://"+listen, "operator", a); derr == nil {
			c.Close("probe")
			ours = true
		}
	}
	if ours {
		what = "an exechost gateway of this state directory (another `exechost up`, or `exechost gateway`)"
	} else if isExechostGateway(pctx, "ws://"+listen) {
		what = "another exechost gateway, of another state directory (another `exechost up --state-dir …` or `exechost gateway`)"
	}
	return hint.Wrap(fmt.Errorf("%s is already in use by %s", listen, what), "stop it, or use what is running there; to run a second one, `exechost up --state-dir OTHER --listen 127.0.0.1:0 --web 127.0.0.1:0`")
}

func gatewayErr(err error) error {
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	return nil
}

// upCreatedMarker names the marker file, in the state directory, saying
// that file was created by an `up` that has not yet printed its summary:
// a run that fails before the summary leaves it, so the next run still
// explains the created file instead of calling it "kept".
func upCreatedMarker(dir, file string) string {
	return filepath.Join(dir, "up-created-"+file)
}

// upCreate creates path with create unless it exists; created is also
// true when an earlier `up` created it but failed before saying so.
func upCreate(dir, path string, create func() error) (created bool, err error) {
	marker := upCreatedMarker(dir, filepath.Base(path))
	if _, err := os.Lstat(path); err == nil {
		_, merr := os.Lstat(marker)
		return merr == nil, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		return false, err
	}
	return true, create()
}

// upShown removes the markers of upCreate once the summary has said what
// was created.
func upShown(dir string) error {
	for _, f := range []string{approvals.DefaultPath(dir), filepath.Join(dir, state.ConfigFile)} {
		if err := os.Remove(upCreatedMarker(dir, filepath.Base(f))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// ensureUpApprovals creates exec-approvals.json for a fresh state directory
// with allowlist + ask on miss + askFallback deny. An existing file is never
// touched.
func ensureUpApprovals(dir string) (created bool, err error) {
	s := approvals.NewStore(dir)
	return upCreate(dir, s.Path, func() error {
		_, err := s.Update(func(f *approvals.File) error {
			f.Defaults.Security = string(policy.SecurityAllowlist)
			f.Defaults.Ask = string(policy.AskOnMiss)
			f.Defaults.AskFallback = string(policy.FallbackDeny)
			return nil
		})
		return err
	})
}

// How `up` found exechost.json (upSummary.config).
const (
	upConfigWritten = "written" // absent: written with the local node as tools.exec.defaultNode
	upConfigKept    = "kept"    // present with a default node or binding
	upConfigNoDef   = "nodef"   // present without either: a second node makes plain exec NODE_REQUIRED
)

// upConfigText is the exechost.json `up` writes: its embedded settings
// (upConfig) plus the local node as the default node, so an exec without
// a node keeps going to this machine after a second node is paired
// (without restricting agents to it, as tools.exec.node would).
const upConfigText = `// Written by ` + "`exechost up`" + ` (docs/gateway.md). Edit freely; SIGHUP or
// restarting up applies it. defaultNode is where an exec without a node
// goes when several nodes are paired (this machine's node).
{
  "tools": {
    "exec": {"host": "node", "security": "allowlist", "ask": "on-miss", "defaultNode": %q}
  }
}
`

// ensureUpConfig writes <dir>/exechost.json when it is absent, naming the
// local node as the default node; the gateway then starts on it. The
// node's id is known before it connects: its pairing's id, else the id its
// key gives a first pairing. An existing file is never touched.
func ensureUpConfig(dir string) (string, error) {
	path := filepath.Join(dir, state.ConfigFile)
	created, err := upCreate(dir, path, func() error {
		id, err := node.LoadIdentity(dir)
		if err != nil {
			return err
		}
		nodeID := id.NodeID
		if id.Token == "" || nodeID == "" {
			key, _, err := nodekey.LoadOrCreate(dir)
			if err != nil {
				return err
			}
			nodeID = key.DeviceID()
		}
		if err := atomicfile.WriteFile(path, fmt.Appendf(nil, upConfigText, nodeID), 0o600); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	})
	if err != nil || created {
		return upConfigWritten, err
	}
	cfg, err := config.Load(path, false)
	if err != nil {
		return "", err
	}
	if cfg.Tools.Exec.DefaultNode != "" || cfg.Tools.Exec.Node != "" {
		return upConfigKept, nil
	}
	return upConfigNoDef, nil
}

// upSummary is what `up` prints once everything serves.
type upSummary struct {
	dir, url, approverURL, nodeID string
	fresh, noApprover             bool
	// config is how exechost.json was found (upConfigWritten, …).
	config string
	// exe is how to call exechost from another terminal (exechostCommand).
	exe string
	// mcpCredential is the agent credential file for MCP clients.
	mcpCredential string
	// tmp is set when this binary is a temporary `go run` build (already
	// said at the start).
	tmp bool
}

// exechostCommand is how the "Next" lines call exechost: plainly when
// `exechost` on PATH is this binary, else this binary's absolute path; for
// a temporary build (tmp), the path `go install` will give it.
func exechostCommand(tmp *tempBuild) string {
	if tmp != nil {
		if onPath, err := exec.LookPath("exechost"); err == nil && onPath == tmp.installed {
			return "exechost"
		}
		return tmp.installed
	}
	self, err := os.Executable()
	if err != nil {
		return "exechost"
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return "exechost"
	}
	if onPath, err := exec.LookPath("exechost"); err == nil {
		if p, err := filepath.EvalSymlinks(onPath); err == nil && p == self {
			return "exechost"
		}
	}
	return self
}

// tempBuild describes a binary `go run` built into a temporary directory,
// which is deleted when it exits: what `up` prints must not point there.
type tempBuild struct {
	self      string // the temporary binary
	install   string // the command that installs exechost for good
	installed string // where that puts the binary
}

// detectTempBuild returns a tempBuild when self lies in a `go run` work
// directory ($GOTMPDIR or $TMPDIR/go-build…/b001/exe/exechost), else nil.
// cwd decides the install line: a checkout installs ./cmd/exechost.
func detectTempBuild(self, cwd string) *tempBuild {
	dir := filepath.Dir(self)
	if filepath.Base(dir) != "exe" {
		return nil
	}
	found := false
	for d := filepath.Dir(dir); d != filepath.Dir(d); d = filepath.Dir(d) {
		if strings.HasPrefix(filepath.Base(d), "go-build") {
			found = true
			break
		}
	}
	if !found {
		return nil
	}
	// CGO_ENABLED=0: a static binary, which the sandbox's resident agent
	// needs (README "Install"). Nothing is published to a module proxy, so
	// the line installs from the checkout `go run` ran in (found upwards
	// from cwd), or says to run it in one.
	t := &tempBuild{self: self, install: "cd YOUR-EXECHOST-CHECKOUT && CGO_ENABLED=0 go install ./cmd/exechost"}
	for d := cwd; d != "" && d != filepath.Dir(d); d = filepath.Dir(d) {
		if fi, err := os.Stat(filepath.Join(d, "cmd", "exechost")); err == nil && fi.IsDir() {
			t.install = "CGO_ENABLED=0 go install ./cmd/exechost"
			if d != cwd {
				t.install = "cd " + shellWord(d) + " && " + t.install
			}
			break
		}
	}
	t.installed = filepath.Join(goBinDir(), "exechost")
	return t
}

// goBinDir is where `go install` puts binaries: $GOBIN, else the first
// $GOPATH entry's bin, else ~/go/bin (Go's defaults, without running go).
func goBinDir() string {
	if b := os.Getenv("GOBIN"); b != "" {
		return b
	}
	if p := filepath.SplitList(os.Getenv("GOPATH")); len(p) > 0 && p[0] != "" {
		return filepath.Join(p[0], "bin")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join("~", "go", "bin")
	}
	return filepath.Join(home, "go", "bin")
}

// upTempBuild is the tempBuild of this process, or nil.
func upTempBuild() *tempBuild {
	self, err := os.Executable()
	if err != nil {
		return nil
	}
	cwd, _ := os.Getwd()
	return detectTempBuild(self, cwd)
}

// printTempBuild says, before anything else, that this binary disappears
// when `up` stops, and how to install it.
func printTempBuild(g *globals, t *tempBuild) {
	fmt.Fprintf(g.stdout, "note: this exechost is a temporary build of `go run` (%s), deleted when it stops;\n", t.self)
	fmt.Fprintf(g.stdout, "  the commands and MCP config below name the installed binary instead. Install it with:\n")
	fmt.Fprintf(g.stdout, "  %s    # puts it at %s\n\n", t.install, t.installed)
}

// printUpNext prints the summary in one write: a reader (a script, a
// test) that sees its first line sees all of it.
func printUpNext(g *globals, s upSummary) {
	var b strings.Builder
	w := &b
	defer func() { _, _ = io.WriteString(g.stdout, b.String()) }()
	fmt.Fprintf(w, "exechost is up (Ctrl-C stops everything)\n")
	fmt.Fprintf(w, "  gateway   %s   (token in %s)\n", s.url, state.TokenPath(s.dir))
	name := ""
	if id, err := node.LoadIdentity(s.dir); err == nil {
		name = id.DisplayName
	}
	fmt.Fprintf(w, "  node      %s   (connected, this machine)\n", NodeLabel(name, s.nodeID))
	if !s.noApprover {
		fmt.Fprintf(w, "  approver  %s   (prompts also appear here; answer \"ID allow-once\")\n", s.approverURL)
	}
	if s.fresh {
		fmt.Fprintf(w, "  policy    %s created: security=allowlist ask=on-miss askFallback=deny\n", approvals.DefaultPath(s.dir))
	} else {
		fmt.Fprintf(w, "  policy    %s (kept as it is)\n", approvals.DefaultPath(s.dir))
	}
	cfgPath := filepath.Join(s.dir, state.ConfigFile)
	switch s.config {
	case upConfigWritten:
		fmt.Fprintf(w, "  config    %s created: exec without a node goes to this node (tools.exec.defaultNode)\n", cfgPath)
	case upConfigKept:
		fmt.Fprintf(w, "  config    %s (kept as it is)\n", cfgPath)
	case upConfigNoDef:
		fmt.Fprintf(w, "  config    %s (kept as it is; it names no default node: once a second node is paired, exec needs --node, or set tools.exec.defaultNode)\n", cfgPath)
	}
	// Flags only where a fresh terminal's defaults (no environment
	// variables) differ.
	cmd, gw := shellWord(s.exe), ""
	if home, err := os.UserHomeDir(); err != nil || filepath.Join(home, ".openclaw") != s.dir {
		cmd += " --state-dir " + shellWord(s.dir)
	}
	if s.url != DefaultGateway {
		gw = " --gateway " + s.url
	}
	// Decided before "Next" is printed: a reader (a script, a test)
	// waiting for that line then finds the lines under it.
	how, allowed := upNextHow(s.dir, s.noApprover)
	fmt.Fprintf(w, "\nNext, in another terminal:\n")
	fmt.Fprintf(w, "  %s exec%s 'uname -a'   # %s\n", cmd, gw, how)
	if !allowed {
		add := "never ask for it again"
		if s.noApprover {
			add = "then it runs"
		}
		fmt.Fprintf(w, "  %s approvals allowlist add /usr/bin/uname   # %s\n", cmd, add)
	}
	fmt.Fprintf(w, "  %s nodes list%s\n", cmd, gw)
	fmt.Fprintf(w, "  %s approvals get\n", cmd)
	fmt.Fprintf(w, "MCP clients: {\"command\": %q, \"args\": [\"--credential\", %q, \"mcp\", \"--gateway\", %q, \"--agent\", \"main\"]}\n", s.exe, s.mcpCredential, s.url)
	if s.tmp {
		fmt.Fprintf(w, "(these name %s: run the `go install` line printed at the start first)\n", s.exe)
	}
	if s.exe != "exechost" && !s.tmp {
		fmt.Fprintf(w, "(exechost is not on PATH; install it with `CGO_ENABLED=0 go install ./cmd/exechost` from the checkout and make sure $(go env GOPATH)/bin is on PATH)\n")
	}
}

// upNextHow says what `exec 'uname -a'` will do, from what the gateway's
// config routes it to and this node's own policy decides for the default
// agent, and whether it is allowed without asking.
func upNextHow(dir string, noApprover bool) (how string, allowed bool) {
	if cfg, err := config.Load(filepath.Join(dir, state.ConfigFile), true); err == nil && cfg.Tools.Exec.Host == string(policy.HostSandbox) {
		return "runs in the sandbox (tools.exec.host=sandbox in exechost.json)", true
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = dir
	}
	p, err := host.NewEngine(dir, policy.HostNode, "local").Prepare(host.Request{RawCommand: "uname -a", Cwd: home, AgentID: defaultAgent})
	if err != nil {
		return "the node's policy decides (see `exechost approvals check 'uname -a'`)", false
	}
	switch {
	case p.Decision.Outcome == policy.Allow:
		return "allowed by the node's policy: runs on this machine's node at once", true
	case p.Decision.Outcome == policy.AskHuman && !noApprover:
		return "asks the approver (here or in the web UI), then runs on this machine's node", false
	default:
		return "denied until allowlisted (askFallback decides: no one answers)", false
	}
}
