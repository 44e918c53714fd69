package openclaw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/exechost/exechost/internal/approvals"
	"github.com/exechost/exechost/internal/bridge"
	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/host"
	"github.com/exechost/exechost/internal/inflight"
	"github.com/exechost/exechost/internal/policy"
)

// Reconnect backoff, as OpenClaw's own client does it: 1 s doubling to
// 30 s, with jitter so a restarted gateway is not hit by every node at once.
const (
	BackoffInitial = time.Second
	BackoffMax     = 30 * time.Second
)

// Bounds on the node's own waits.
const (
	// callTimeout bounds one node.invoke.result or node.event call.
	callTimeout = 10 * time.Second
	// invokeMargin is added to a command's timeout for the node's bound on
	// one invoke (a prompt included); noTimeoutBound bounds an invoke that
	// carries no timeout at all.
	invokeMargin   = 5 * time.Second
	noTimeoutBound = 30 * time.Minute

	// DefaultMaxInvokes is the default limit on invokes in flight (each
	// holds a goroutine and, for system.run, a process); more are
	// answered UNAVAILABLE "BUSY: …" at once. It matches the exechost
	// node's DefaultMaxRuns.
	DefaultMaxInvokes = 256
	// maxBusyReplies bounds the refusals being delivered at once: each is
	// one bounded call (callTimeout) on its own goroutine, since the read
	// loop must not block. A flood beyond even that is dropped with a
	// log line, and OpenClaw's gateway times those invokes out itself.
	maxBusyReplies = 64
)

// Options configure a Node.
type Options struct {
	// GatewayURL is the OpenClaw gateway's WebSocket URL (ws://host:18789).
	GatewayURL string
	// Token is the gateway's shared token; empty uses the device token a
	// previous pairing saved in the state directory.
	Token string
	// TLSFingerprint pins a wss:// gateway's certificate (SHA-256, hex):
	// the token goes only to the server showing that certificate. Empty:
	// $EXECHOST_TLS_FINGERPRINT, else TLS's normal verification.
	TLSFingerprint string
	// StateDir holds exec-approvals.json, the device key and token.
	StateDir string
	// DisplayName is shown in `openclaw nodes list` (default: host name).
	DisplayName string
	// InstanceID is the client instance id (default: host name).
	InstanceID string
	// Version is exechost's version, sent as client.version.
	Version string
	// Runner runs commands; nil answers every system.run with
	// SYSTEM_RUN_DISABLED.
	Runner Runner
	// Logger receives connection and invoke logs (default: discard).
	Logger *slog.Logger
	// Stderr receives what an operator must do (pairing commands).
	Stderr io.Writer
	// Sleep waits between reconnects; tests inject it. It returns early
	// with ctx's error.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter scales a backoff delay; tests inject it (default up to +25%).
	Jitter func(d time.Duration) time.Duration
	// OnConnected is called after every hello-ok (tests, readiness).
	OnConnected func()
	// MaxInvokes bounds the invokes in flight; more are refused at once
	// with UNAVAILABLE "BUSY: …". DefaultMaxInvokes when 0.
	MaxInvokes int
	// GatewayApprovals accepts an operator's approval that OpenClaw's
	// gateway forwards with a system.run, for exactly the plan this node
	// returned from system.run.prepare (`--approvals-route gateway|both`;
	// set the engine's prompter to ApprovalPrompter). Off, such approvals
	// are ignored and the denial says how to turn this on.
	GatewayApprovals bool
	// AllowRemoteWidening lets OpenClaw's system.execApprovals.set widen
	// this host's exec-approvals.json (approvals.RemoteWideningFlag); off,
	// a widening needs ConfirmWidening's answer.
	AllowRemoteWidening bool
	// ConfirmWidening asks this machine's approver to confirm a remote
	// widening (nil: nobody can, and every widening is refused).
	ConfirmWidening approvals.Asker
	// SampleHostStats samples what node.host.stats reports after each
	// connect and every HostStatsInterval (default SampleHostStats);
	// HostStatsTick replaces that interval's ticker (tests).
	SampleHostStats func() (HostStats, error)
	HostStatsTick   <-chan time.Time
	// Now is the clock prepared plans are stamped and expired by
	// (default time.Now; tests inject it).
	Now func() time.Time
}

// Node is exechost serving an OpenClaw gateway as a node.
type Node struct {
	opts Options
	id   *Identity
	log  *slog.Logger

	mu       sync.Mutex
	conn     *bridge.Conn
	active   map[string]*activeInvoke
	invokes  inflight.Limiter // invokes being served (Options.MaxInvokes)
	refusals inflight.Limiter // BUSY replies being delivered (maxBusyReplies)
	pairMsg  string
	hinted   bool                 // the command-surface hint was printed
	served   bool                 // an invoke arrived (noteServed)
	runs     map[string]*runState // system.run in flight, by run id
	prepared preparedPlans        // what system.run.prepare returned (approve.go)
}

// New loads (or creates) the device key and returns a node ready to Run.
func New(opts Options) (*Node, error) {
	if opts.GatewayURL == "" {
		return nil, hint.Wrap(errors.New("openclaw: gateway URL required"), "--openclaw ws://HOST:18789")
	}
	if _, err := tlsPin(opts.TLSFingerprint); err != nil {
		return nil, err // a malformed pin is refused at start, not at each reconnect
	}
	id, err := LoadOrCreateIdentity(opts.StateDir)
	if err != nil {
		return nil, err
	}
	if opts.Token == "" {
		opts.Token = loadDeviceToken(opts.StateDir, opts.GatewayURL)
	}
	hostname, _ := os.Hostname()
	if opts.DisplayName == "" {
		opts.DisplayName = hostname
	}
	if opts.InstanceID == "" {
		opts.InstanceID = hostname
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	if opts.Sleep == nil {
		opts.Sleep = sleepCtx
	}
	if opts.MaxInvokes <= 0 {
		opts.MaxInvokes = DefaultMaxInvokes
	}
	if opts.SampleHostStats == nil {
		opts.SampleHostStats = SampleHostStats
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Jitter == nil {
		opts.Jitter = func(d time.Duration) time.Duration { return d + rand.N(d/4+1) }
	}
	return &Node{opts: opts, id: id, log: opts.Logger, active: map[string]*activeInvoke{}, runs: map[string]*runState{}}, nil
}

func (n *Node) now() time.Time { return n.opts.Now() }

// DeviceID is the id OpenClaw knows this node by (hex SHA-256 of its
// public key).
func (n *Node) DeviceID() string { return n.id.DeviceID() }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run connects and serves until ctx ends, reconnecting with backoff when
// the gateway goes away. It returns early only for errors a retry cannot
// fix: a protocol mismatch or refused credentials.
func (n *Node) Run(ctx context.Context) error {
	delay := BackoffInitial
	for ctx.Err() == nil {
		// The read loop starts inside dial, so an invoke can arrive before
		// dial returns: it waits for s.ready before answering on s.conn.
		s := &session{ready: make(chan struct{})}
		conn, hello, err := dial(ctx, n.dialParams(), bridge.Options{OnEvent: func(e string, p json.RawMessage) { n.onEvent(s, e, p) }})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			switch {
			case errors.Is(err, ErrProtocolMismatch):
				return hint.Wrap(err, fmt.Sprintf("this exechost speaks OpenClaw gateway protocol v%d", ProtocolVersion))
			case errors.Is(err, ErrAuth):
				return hint.Wrap(err, "pass the gateway's token with --openclaw-token or OPENCLAW_GATEWAY_TOKEN")
			case errors.Is(err, ErrPairingRequired):
				n.pairingRequired(err)
			default:
				n.log.Warn("openclaw gateway connect failed", "url", n.opts.GatewayURL, "err", err, "retryIn", delay)
			}
			var ce *ConnectError
			wait := n.opts.Jitter(delay)
			if errors.As(err, &ce) && ce.RetryAfterMs > 0 {
				wait = time.Duration(ce.RetryAfterMs) * time.Millisecond
			}
			if n.opts.Sleep(ctx, wait) != nil {
				break
			}
			delay = min(delay*2, BackoffMax)
			continue
		}
		delay = BackoffInitial
		s.conn = conn
		n.connected(conn, hello)
		close(s.ready)
		go n.publishHostStats(conn)
		select {
		case <-conn.Done():
			n.log.Warn("openclaw gateway connection lost; reconnecting", "err", conn.Err())
		case <-ctx.Done():
			_ = conn.Close("node shutting down")
		}
		n.disconnected(conn)
	}
	return nil
}

// activeInvoke is one command in flight, cancellable by node.invoke.cancel.
type activeInvoke struct{ cancel context.CancelFunc }

// session is one gateway connection as invokes see it: conn is set, and
// ready closed, once the handshake has finished.
type session struct {
	conn  *bridge.Conn
	ready chan struct{}
}

func (n *Node) dialParams() dialParams {
	return dialParams{
		URL: n.opts.GatewayURL, Token: n.opts.Token, TLSFingerprint: n.opts.TLSFingerprint, Identity: n.id,
		Role: RoleNode, ClientID: ClientID, ClientMode: ClientMode, Caps: Caps, Commands: Commands,
		DisplayName: n.opts.DisplayName, InstanceID: n.opts.InstanceID,
		Version: n.opts.Version, GOOS: runtime.GOOS, PathEnv: os.Getenv("PATH"),
	}
}

func (n *Node) connected(c *bridge.Conn, hello helloOK) {
	n.mu.Lock()
	n.conn = c
	n.pairMsg = ""
	n.mu.Unlock()
	if hello.Auth.DeviceToken != "" && hello.Auth.DeviceToken != n.opts.Token {
		if err := saveDeviceToken(n.opts.StateDir, n.opts.GatewayURL, hello.Auth.DeviceToken); err != nil {
			n.log.Warn("could not save the OpenClaw device token", "err", err)
		}
	}
	n.log.Info("connected to OpenClaw gateway", "url", n.opts.GatewayURL, "device", n.id.DeviceID(), "server", hello.Server.Version)
	fmt.Fprintf(n.opts.Stderr, "exechost: connected to OpenClaw gateway %s as node %s\n", n.opts.GatewayURL, n.id.DeviceID())
	if !n.hinted && !servedBy(n.opts.StateDir, n.opts.GatewayURL) {
		// The gateway withholds a new node's commands until an operator
		// approves its command surface, and does not tell the node. Once
		// an invoke arrived from it (markServed), it was approved.
		n.hinted = true
		fmt.Fprintf(n.opts.Stderr, "exechost: a new node's commands wait for approval on the gateway host: `openclaw nodes pending`, then `openclaw nodes approve <requestId>`\n")
	}
	if n.opts.OnConnected != nil {
		n.opts.OnConnected()
	}
}

// disconnected cancels every command of the lost connection: its result
// could not be delivered, and OpenClaw does not resend an invoke.
func (n *Node) disconnected(c *bridge.Conn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conn == c {
		n.conn = nil
	}
	for id, a := range n.active {
		a.cancel()
		delete(n.active, id)
	}
}

// pairingRequired prints, once per distinct refusal, what an operator must
// run on the gateway host.
func (n *Node) pairingRequired(err error) {
	var ce *ConnectError
	errors.As(err, &ce)
	req := ""
	if ce != nil {
		req = ce.detail("requestId")
	}
	msg := fmt.Sprintf("exechost: the OpenClaw gateway %s has not paired this device yet (device %s).\n", n.opts.GatewayURL, n.id.DeviceID())
	if req != "" {
		msg += fmt.Sprintf("  On the gateway host run:  openclaw devices approve %s\n", req)
	} else {
		msg += "  On the gateway host run:  openclaw devices list   then   openclaw devices approve <requestId>\n"
	}
	msg += "  then approve its command surface:  openclaw nodes pending   and   openclaw nodes approve <requestId>\n" +
		"  exechost keeps retrying and connects as soon as the device is approved.\n"
	n.mu.Lock()
	dup := n.pairMsg == msg
	n.pairMsg = msg
	n.mu.Unlock()
	if !dup {
		fmt.Fprint(n.opts.Stderr, msg)
	}
	n.log.Warn("openclaw pairing required", "device", n.id.DeviceID(), "requestId", req)
}

// onEvent runs on the read loop: it must not block.
func (n *Node) onEvent(s *session, event string, payload json.RawMessage) {
	switch event {
	case EventInvokeRequest:
		var req invokeRequest
		if err := json.Unmarshal(payload, &req); err != nil || req.ID == "" {
			n.log.Warn("ignoring a malformed node.invoke.request", "err", err)
			return
		}
		n.startInvoke(s, req)
	case EventInvokeCancel:
		var c invokeCancel
		if json.Unmarshal(payload, &c) == nil {
			n.cancelInvoke(c.InvokeID)
		}
	}
}

// startInvoke serves req on its own goroutine, or refuses it BUSY when
// Options.MaxInvokes invokes are already in flight.
func (n *Node) startInvoke(s *session, req invokeRequest) {
	release, full := n.invokes.Acquire("", n.opts.MaxInvokes, 0)
	if full != nil {
		n.refuseBusy(s, req, full.InFlight)
		return
	}
	n.mu.Lock()
	if prev := n.active[req.ID]; prev != nil {
		prev.cancel() // a resend replaces the first attempt, as OpenClaw's host does
	}
	bound := noTimeoutBound
	if req.TimeoutMs > 0 {
		bound = time.Duration(req.TimeoutMs)*time.Millisecond + invokeMargin
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	me := &activeInvoke{cancel: cancel}
	n.active[req.ID] = me
	n.mu.Unlock()
	go func() {
		defer release()
		defer cancel()
		select {
		case <-s.ready:
		case <-ctx.Done():
			return
		}
		n.noteServed()
		res := n.invoke(ctx, req)
		n.mu.Lock()
		if n.active[req.ID] == me {
			delete(n.active, req.ID)
		}
		n.mu.Unlock()
		res.ID, res.NodeID = req.ID, req.NodeID
		n.send(s.conn, MethodInvokeResult, res)
	}()
}

// noteServed records, once per process, that this gateway sends invokes
// (its command surface was approved). It runs on an invoke's goroutine,
// never the read loop: it writes a file.
func (n *Node) noteServed() {
	n.mu.Lock()
	first := !n.served
	n.served = true
	n.mu.Unlock()
	if first && !servedBy(n.opts.StateDir, n.opts.GatewayURL) {
		if err := markServed(n.opts.StateDir, n.opts.GatewayURL); err != nil {
			n.log.Warn("could not record that the OpenClaw gateway approved this node's commands", "err", err)
		}
	}
}

// refuseBusy answers req UNAVAILABLE "BUSY: …" without running it. The
// reply goes out on its own goroutine (the read loop must not block), at
// most maxBusyReplies at once; beyond that req is dropped with a log line.
func (n *Node) refuseBusy(s *session, req invokeRequest, inFlight int) {
	release, full := n.refusals.Acquire("", maxBusyReplies, 0)
	if full != nil {
		n.log.Warn("node.invoke.request dropped: invokes and BUSY replies are both at their limits", "invoke", req.ID, "command", req.Command)
		return
	}
	n.log.Warn("node.invoke.request refused BUSY", "invoke", req.ID, "command", req.Command, "inFlight", inFlight)
	res := failure(CodeUnavailable,
		"BUSY: this node already serves %d invokes, its limit; retry when one finishes (hint: raise it with `exechost node run --openclaw URL --max-runs N`)", inFlight)
	res.ID, res.NodeID = req.ID, req.NodeID
	go func() {
		defer release()
		// s.conn is set only once s.ready is closed, which a failed
		// handshake never does.
		wait := time.NewTimer(callTimeout)
		defer wait.Stop()
		select {
		case <-s.ready:
			n.send(s.conn, MethodInvokeResult, res)
		case <-wait.C:
		}
	}()
}

func (n *Node) cancelInvoke(id string) {
	n.mu.Lock()
	a := n.active[id]
	n.mu.Unlock()
	if a != nil {
		n.log.Info("node.invoke.cancel: ending the command", "invoke", id)
		a.cancel()
	}
}

// send makes one bounded call on c, logging a failure: a result or event
// that cannot be delivered has nowhere else to go.
func (n *Node) send(c *bridge.Conn, method string, params any) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(c.Context(), callTimeout)
	defer cancel()
	if err := c.Call(ctx, method, params, nil); err != nil {
		n.log.Warn("openclaw call failed", "method", method, "err", err)
	}
}

// runState is what the node tracks of one system.run while it runs: the
// caller's suppressNotifyOnExit (the engine does not carry it) and the
// engine's exec.finished event, which systemRun sends itself once it has
// the whole result.
type runState struct {
	suppress bool
	mu       sync.Mutex
	finished *bridge.ExecEvent
}

func (r *runState) finishedEvent() *bridge.ExecEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.finished
}

func (n *Node) track(runID string, suppress bool) *runState {
	r := &runState{suppress: suppress}
	n.mu.Lock()
	n.runs[runID] = r
	n.mu.Unlock()
	return r
}

func (n *Node) untrack(runID string) {
	n.mu.Lock()
	delete(n.runs, runID)
	n.mu.Unlock()
}

// HostEvent takes the engine's lifecycle events (set it as the engine's
// OnEvent) and sends what OpenClaw's own node host sends: exec.denied
// with one of its reason codes, at once; exec.finished later from
// systemRun, with the result's fields; never exec.started, which
// OpenClaw's host does not send (its gateway would turn each into an
// "Exec started" message in the agent's session and wake the agent). It
// blocks for at most one bounded call, so an event reaches the gateway
// before the invoke's result does.
func (n *Node) HostEvent(ev bridge.ExecEvent) {
	n.mu.Lock()
	c := n.conn
	run := n.runs[ev.RunID]
	n.mu.Unlock()
	switch ev.Kind {
	case bridge.EventExecFinished:
		if run != nil {
			e := ev
			run.mu.Lock()
			run.finished = &e
			run.mu.Unlock()
		}
	case bridge.EventExecDenied:
		suppress := run != nil && run.suppress
		n.event(c, bridge.EventExecDenied, map[string]any{
			"sessionKey": ev.SessionKey, "runId": ev.RunID, "host": "node", "command": ev.Command,
			"reason": deniedReason(ev.ReasonCode), "suppressNotifyOnExit": suppress,
		})
	}
}

// deniedEvent sends exec.denied for a run refused before the engine saw
// it.
func (n *Node) deniedEvent(req host.Request, command, reason string, suppress bool) {
	n.mu.Lock()
	c := n.conn
	n.mu.Unlock()
	n.event(c, bridge.EventExecDenied, map[string]any{
		"sessionKey": req.SessionKey, "runId": req.RunID, "host": "node", "command": command,
		"reason": reason, "suppressNotifyOnExit": suppress,
	})
}

// finished sends exec.finished for a run, shaped as OpenClaw's host
// builds it.
func (n *Node) finished(req host.Request, command string, run *runState, res runResult, output string) {
	n.mu.Lock()
	c := n.conn
	n.mu.Unlock()
	p := map[string]any{
		"sessionKey": req.SessionKey, "runId": req.RunID, "host": "node", "command": command,
		"timedOut": res.TimedOut, "success": res.Success, "suppressNotifyOnExit": run.suppress,
	}
	if res.ExitCode != nil {
		p["exitCode"] = *res.ExitCode
	}
	p["output"] = output // OpenClaw's host sends it even when empty
	n.event(c, bridge.EventExecFinished, p)
}

func (n *Node) event(c *bridge.Conn, name string, payload map[string]any) {
	if c == nil {
		return
	}
	js, err := jsonString(payload)
	if err != nil {
		return
	}
	n.send(c, MethodNodeEvent, nodeEvent{Event: name, PayloadJSON: js})
}

// deniedReason maps the engine's denial code (policy.DenialCode) to the
// codes OpenClaw's gateway knows for exec.denied (its
// normalizeDeniedReason): a miss, or what the analysis could not vouch
// for, is allowlist-miss; security=deny is itself; anything else (no
// answer, a human's no) is approval-required.
func deniedReason(code string) string {
	switch code {
	case policy.ReasonSecurityDeny:
		return "security=deny"
	case policy.ReasonAllowlistMiss:
		return "allowlist-miss"
	}
	return "approval-required"
}
