package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/spf13/cobra"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/client"
	"github.com/exechost/exechost/internal/config"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/sandbox"
	"github.com/exechost/exechost/internal/sandbox/pick"
	"github.com/exechost/exechost/internal/state"
)

func init() { register("doctor", newDoctorCmd) }

// Statuses of a doctor finding. Only a problem makes doctor exit 1.
const (
	findingOK      = "ok"
	findingWarn    = "warn"    // works, with a limitation the user should know
	findingProblem = "problem" // something the user's setup needs is broken
	findingSkipped = "skipped" // not checked, and why
)

// Bounds of doctor's probes.
const (
	// doctorDialTimeout bounds reaching the gateway.
	doctorDialTimeout = 5 * time.Second
	// maxClockSkew is how far the gateway's clock may be from this one's
	// before signed handshakes (whose timestamps the gateway checks) and
	// expiry times go wrong.
	maxClockSkew = 30 * time.Second
)

// finding is one check's result: what was found and, for anything not ok,
// the exact fix.
type finding struct {
	Check  string `json:"check"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// doctorReport is `doctor --json`.
type doctorReport struct {
	OK       bool      `json:"ok"`
	Findings []finding `json:"findings"`
}

func newDoctorCmd(g *globals) *cobra.Command {
	var url string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check what this machine's exechost setup needs, and say how to fix what is wrong",
		Long: `Check the state directory's permissions, whether the gateway answers and whose
it is, the approver's socket, the sandbox backends, Landlock and the clock
against the gateway's. Each finding is ok, warn (works, with a limitation),
problem (broken) or skipped, with the exact fix. It changes nothing.

Exits 1 when any finding is a problem, else 0. With --json, stdout carries one
object: {"ok": bool, "findings": [{"check","status","detail","fix"}]}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fs, err := g.doctor(cmd.Context(), url)
			if err != nil {
				return err
			}
			rep := doctorReport{OK: true, Findings: fs}
			for _, f := range fs {
				if f.Status == findingProblem {
					rep.OK = false
				}
			}
			if asJSON {
				if err := g.printJSON(rep); err != nil {
					return err
				}
			} else {
				for _, f := range fs {
					fmt.Fprintf(g.stdout, "%-8s %-10s %s\n", f.Status, f.Check, f.Detail)
					if f.Fix != "" {
						fmt.Fprintf(g.stdout, "%-8s %-10s fix: %s\n", "", "", f.Fix)
					}
				}
			}
			if !rep.OK {
				if asJSON {
					return exitError{ExitFailure}
				}
				return errors.New("doctor found problems (see the fix lines above)")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "gateway", DefaultGateway, "gateway URL to check")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the findings as one JSON object")
	return cmd
}

// doctor runs every check in order.
func (g *globals) doctor(ctx context.Context, url string) ([]finding, error) {
	dir, err := g.dir()
	if err != nil {
		return nil, err
	}
	out := checkStateDir(dir)
	gw, skew := g.checkGateway(ctx, dir, url)
	out = append(out, gw, skew, checkApprover(dir))
	out = append(out, checkSandbox(ctx, dir)...)
	out = append(out, checkLandlock(), checkConfinement(dir))
	return out, nil
}

// checkConfinement says which layers of the jail hold for a run of the
// wildcard agent on this host, its reach, and whether such a run is
// refused (a layer the policy needs cannot be built, and it does not say
// unsupported=warn).
func checkConfinement(dir string) finding {
	f := finding{Check: "jail"}
	e := host.NewEngine(dir, policy.HostGateway, "local")
	p, err := e.Prepare(host.Request{RawCommand: "true", Cwd: os.TempDir()})
	if err != nil {
		f.Status, f.Detail, f.Fix = findingProblem, err.Error(), hint.Of(err)
		return f
	}
	f.Detail = "agent *: " + e.ConfinementText(p)
	warning, err := e.CheckJail(p)
	switch {
	case err != nil:
		f.Status, f.Fix = findingProblem, hint.Of(err)
	case warning != "":
		f.Status, f.Fix = findingWarn, "run on Linux 6.7 or later with Landlock enabled to confine runs fully"
	default:
		f.Status = findingOK
	}
	return f
}

// checkStateDir checks the state directory and its secrets: owned by this
// user, readable by nobody else.
func checkStateDir(dir string) []finding {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return []finding{{Check: "state", Status: findingWarn, Detail: dir + " does not exist yet", Fix: "exechost up (it creates it, 0700)"}}
	case err != nil:
		return []finding{{Check: "state", Status: findingProblem, Detail: err.Error(), Fix: "check the path given by --state-dir or $" + state.EnvDir}}
	case !fi.IsDir():
		return []finding{{Check: "state", Status: findingProblem, Detail: dir + " is not a directory", Fix: "pass --state-dir DIR, or move " + dir + " away"}}
	}
	if err := state.CheckOwner(fi); err != nil {
		return []finding{{Check: "state", Status: findingProblem, Detail: err.Error(), Fix: "run exechost as the directory's owner, or use your own --state-dir"}}
	}
	var out []finding
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		out = append(out, finding{Check: "state", Status: findingProblem, Detail: fmt.Sprintf("%s is %04o: other users can reach its tokens, keys and sockets", dir, perm), Fix: "chmod 700 " + shellWord(dir)})
	}
	for _, name := range []string{state.GatewayFile, state.NodeFile, state.ApprovalsFile, "node.key"} {
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			out = append(out, finding{Check: "state", Status: findingProblem, Detail: fmt.Sprintf("%s is %04o: readable beyond this user", p, perm), Fix: "chmod 600 " + shellWord(p)})
		}
	}
	if len(out) == 0 {
		out = append(out, finding{Check: "state", Status: findingOK, Detail: dir + " (0700, yours; secrets 0600)"})
	}
	return out
}

// checkGateway says whether a gateway answers at url with this state
// directory's credentials, whose it is when it does not, and how far its
// clock is from this one (the Date of its handshake response).
func (g *globals) checkGateway(ctx context.Context, dir, url string) (gw, skew finding) {
	gw = finding{Check: "gateway"}
	skew = finding{Check: "clock", Status: findingSkipped, Detail: "no gateway answered to compare with"}
	p := probeGateway(ctx, url)
	if p.date != (time.Time{}) {
		d := time.Since(p.date).Round(time.Second)
		skew = finding{Check: "clock", Status: findingOK, Detail: fmt.Sprintf("within %s of the gateway's (difference %s)", maxClockSkew, d)}
		if d > maxClockSkew || d < -maxClockSkew {
			skew = finding{Check: "clock", Status: findingProblem,
				Detail: fmt.Sprintf("this clock differs from the gateway's by %s: signed node handshakes and join-key expiry depend on both", d),
				Fix:    "synchronise both clocks (e.g. `timedatectl set-ntp true` on each machine)"}
		}
	}
	// This directory's own credentials first: a token file it refuses to
	// read (mode 0644, another owner) is a local fix, not a stranger's
	// gateway.
	// (A missing token file is not that: the gateway at url may be
	// another directory's, which the probe below tells.)
	if _, err := g.clientAuth(); err != nil && (g.credential != "" || os.Getenv(client.EnvCredential) != "" || fileExists(state.TokenPath(dir))) {
		gw.Status, gw.Detail, gw.Fix = findingProblem, "this state directory's gateway credentials cannot be used: "+withoutHint(err), hint.Of(err)
		if gw.Fix == "" {
			gw.Fix = "see the detail; `exechost up` writes them with this state directory"
		}
		return gw, skew
	}
	short := *g
	short.connectTimeout = doctorDialTimeout
	c, err := short.dialGateway(ctx, url, bridge.RoleOperator)
	if err == nil {
		c.Close("doctor")
		gw.Status, gw.Detail = findingOK, fmt.Sprintf("%s answers with this state directory's token (%s)", url, dir)
		return gw, skew
	}
	switch {
	case p.refused || (ExitCode(err) == ExitUnavailable && !p.challenge):
		// A problem (exit 1), as the README promises: exec, nodes and MCP
		// all fail without it.
		gw.Status, gw.Detail = findingProblem, fmt.Sprintf("no gateway answers at %s: exec, nodes and MCP need one (run needs none)", url)
		gw.Fix = "exechost up   (or exechost gateway; --gateway sets the URL)"
	case p.challenge:
		gw.Status = findingProblem
		gw.Detail = fmt.Sprintf("an exechost gateway answers at %s but refuses this state directory's credentials: it is another state directory's gateway (%s)", url, firstClause(err))
		gw.Fix = "run client commands with that gateway's --state-dir, or set $" + EnvGatewayToken + " to its token"
	case ExitCode(err) == ExitTimeout:
		gw.Status, gw.Detail = findingProblem, fmt.Sprintf("something accepts connections at %s but does not answer as an exechost gateway within %s", url, doctorDialTimeout)
		gw.Fix = "find what listens there (`ss -ltnp`), stop it, or point --gateway at the real gateway"
	default:
		gw.Status, gw.Detail = findingProblem, firstClause(err)
		gw.Fix = "see the hint in the detail; `exechost up` starts a gateway with this state directory"
	}
	return gw, skew
}

// gatewayProbe is what an unauthenticated look at a gateway URL saw.
type gatewayProbe struct {
	challenge bool      // it spoke first with connect.challenge: an exechost gateway
	refused   bool      // nothing listens there (connection refused)
	date      time.Time // its HTTP Date header, zero when absent
}

// probeGateway opens a WebSocket to url without credentials and reads the
// first frame: an exechost gateway speaks first with connect.challenge.
func probeGateway(ctx context.Context, url string) gatewayProbe {
	var p gatewayProbe
	pctx, cancel := context.WithTimeout(ctx, doctorDialTimeout)
	defer cancel()
	ws, resp, err := websocket.Dial(pctx, url, client.WebSocketOptions())
	if resp != nil {
		if d, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
			p.date = d
		}
	}
	if err != nil {
		p.refused = errors.Is(err, syscall.ECONNREFUSED)
		return p
	}
	defer ws.CloseNow()
	f, err := bridge.ReadFrame(pctx, ws)
	p.challenge = err == nil && f.Type == bridge.TypeEvent && f.Event == bridge.EventConnectChallenge
	return p
}

// isExechostGateway reports whether an exechost gateway serves url,
// whichever state directory it belongs to.
func isExechostGateway(ctx context.Context, url string) bool {
	return probeGateway(ctx, url).challenge
}

// checkApprover says whether an approver listens on this state
// directory's approval socket (else askFallback answers every prompt).
func checkApprover(dir string) finding {
	f := finding{Check: "approver"}
	sock := approvals.DefaultSocketPath(dir)
	if file, err := approvals.NewStore(dir).Load(); err == nil {
		home, _ := os.UserHomeDir()
		sock = file.SocketPath(dir, home)
	}
	c, err := net.DialTimeout("unix", sock, doctorDialTimeout)
	switch {
	case err == nil:
		// Read its hello before closing: closing with the hello unread
		// resets the connection, which the approver prints in up's
		// terminal ("connection reset by peer") on every doctor run.
		_ = c.SetReadDeadline(time.Now().Add(doctorDialTimeout))
		line, rerr := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if rerr != nil || !strings.Contains(line, `"hello"`) {
			f.Status, f.Detail = findingProblem, fmt.Sprintf("something listens on %s but does not greet as an approver (%v)", sock, rerr)
			f.Fix = "stop what listens there, then exechost approver"
			return f
		}
		f.Status, f.Detail = findingOK, "an approver listens on "+sock
	case errors.Is(err, fs.ErrNotExist):
		f.Status, f.Detail = findingWarn, "no approver: a command that needs a human's answer gets askFallback at once ("+sock+" does not exist)"
		f.Fix = "exechost approver   (or exechost up, which starts one)"
	case errors.Is(err, syscall.ECONNREFUSED):
		f.Status, f.Detail = findingWarn, "no approver listens on "+sock+" (the socket is left from one that stopped)"
		f.Fix = "exechost approver   (it replaces the stale socket)"
	default:
		f.Status, f.Detail = findingProblem, fmt.Sprintf("approval socket %s: %v", sock, err)
		f.Fix = "check its permissions: it must be this user's, in a 0700 directory"
	}
	return f
}

// checkSandbox reports the sandbox backends (sandbox doctor has the
// details). No working backend is a problem when host=sandbox is what
// agents get by default (tools.exec.host unset or "sandbox").
func checkSandbox(ctx context.Context, dir string) []finding {
	cfg, err := config.Load(filepath.Join(dir, state.ConfigFile), true)
	if err != nil {
		return []finding{{Check: "sandbox", Status: findingProblem, Detail: firstClause(err), Fix: "fix exechost.json (the error names the key)"}}
	}
	sc := cfg.Sandbox.WithDefaults()
	if sc.Backend == sandbox.BackendNone {
		return []finding{{Check: "sandbox", Status: findingSkipped, Detail: "sandbox.backend is none: host=sandbox is refused"}}
	}
	d, err := pick.Diagnose(ctx, cfg.Sandbox, dir)
	if err != nil {
		return []finding{{Check: "sandbox", Status: findingProblem, Detail: firstClause(err), Fix: "exechost sandbox doctor"}}
	}
	if d.Selected != "" {
		return []finding{{Check: "sandbox", Status: findingOK, Detail: fmt.Sprintf("backend %s works (sandbox.backend %s)", d.Selected, d.Configured)}}
	}
	var why []string
	for _, s := range d.Backends {
		why = append(why, s.Name+": "+s.Detail)
	}
	f := finding{Check: "sandbox", Status: findingWarn, Detail: "no sandbox backend works: " + strings.Join(why, "; "), Fix: "exechost sandbox doctor (it says what each backend needs)"}
	if h := cfg.Tools.Exec.Host; h == "" || h == string(policy.HostSandbox) {
		f.Status = findingProblem
		f.Detail += "; agents' exec goes to host=sandbox by default here, so it fails"
	}
	return []finding{f}
}

// firstClause is err's message without its wrapped causes' repetition, for
// one line of a report.
func firstClause(err error) string {
	return strings.TrimSpace(strings.ReplaceAll(err.Error(), "\n", " "))
}

// withoutHint is err's one-line text without its hint, which a finding
// shows as its fix.
func withoutHint(err error) string {
	s := firstClause(err)
	if h := hint.Of(err); h != "" {
		s = strings.Replace(s, " (hint: "+h+")", "", 1)
	}
	return s
}

// fileExists reports whether path names something (a broken symlink
// counts: it is there to be fixed).
func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// shellWord quotes s for a fix line when it needs it.
func shellWord(s string) string {
	if s == "" || strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./:@=+,-%", r))
	}) >= 0 {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return s
}
