// Package egress is the proxy through which a confined run reaches the
// network by name: HTTP CONNECT and plain (absolute-form) HTTP.
//
// Contract:
//   - A connection is allowed only when the name the client asked for (the
//     CONNECT authority, or the request URL's host, which is also the Host
//     the server is sent) matches one of the run's Patterns. Names match names and
//     IP literals match IP literals; a resolved address never matches a
//     name pattern.
//   - The proxy resolves an allowed name itself (an injected Resolver) and
//     dials only addresses it checked. When any resolved address is
//     forbidden (loopback, private, link-local, unspecified, multicast,
//     CGNAT and other special ranges) and the pattern lacks "/private", the
//     connection is refused: a public name that resolves inward is how a
//     rebinding attack reaches the host's own services. An IP-literal
//     pattern names its address, so it may be private.
//   - A name on no pattern is refused, or, for a run with Ask, put to the
//     injected Asker: allow-once lets that connection through, allow-always
//     also adds the exact host:port to that run's list (the asker persists
//     it where it wants), deny refuses. A question not answered within
//     AskTimeout falls to the run's askFallback.
//   - Every connection, allowed or refused, is given to the injected
//     Recorder once it ends: host, port, bytes each way, the rule or
//     approval that allowed it or why it was refused, run id, agent id.
//     Identical refusals within FoldWindow are folded into one record and
//     a count, so refusals cannot flood the log.
//   - A run's identity is the listener it was given (Attach) and the
//     token that listener demands in Proxy-Authorization: a run reaching
//     another run's listener without that run's token is refused, and one
//     run's allow-always never widens another's list.
//
// TLS is not terminated: the SNI and Host inside a CONNECT tunnel are not
// checked, so a server that fronts several names behind one allowed name
// (domain fronting) is reachable through that name.
package egress

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exechost/exechost/internal/hint"
)

// Resolver resolves a name to addresses; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Decision is an approver's answer about one connection.
type Decision int

const (
	Deny Decision = iota
	AllowOnce
	AllowAlways
)

func (d Decision) String() string {
	switch d {
	case AllowOnce:
		return "allow-once"
	case AllowAlways:
		return "allow-always"
	}
	return "deny"
}

// Question is what the Asker is asked: Command, in run RunID of agent
// AgentID, wants Target ("git in run 7f3a wants github.com:443").
type Question struct {
	RunID, AgentID, Command string
	Target                  Target
}

// Asker puts a question to the approvers. It returns when ctx ends (the
// proxy bounds it by AskTimeout) with ctx's error.
type Asker interface {
	AskEgress(ctx context.Context, q Question) (Decision, error)
}

// Record is one connection on the record.
type Record struct {
	Start    time.Time
	Duration time.Duration
	RunID    string
	AgentID  string
	// Method is CONNECT, or the plain HTTP request's method.
	Method  string
	Host    string
	Port    int
	Allowed bool
	// Rule is what allowed it: a pattern as written, "approval allow-once",
	// "approval allow-always" or "askFallback=full". Empty when refused.
	Rule string
	// Refused says why it was refused (empty when allowed); Error says
	// how an allowed connection failed (a dial error, a reset).
	Refused, Error string
	// Addr is the address dialed.
	Addr string
	// Up is bytes from the run to the server, Down the other way (the
	// tunnelled bytes for CONNECT; the request and response as sent on the
	// wire for plain HTTP).
	Up, Down int64
	// Repeats counts identical refusals folded into this record: ones
	// that came after the previous record of the same refusal, within
	// FoldWindow of it, and were not recorded one by one.
	Repeats int
}

// FoldWindow is how long identical refusals of one run are folded into
// one record; foldKeys bounds the distinct refusals folded per run (more
// are folded together under one key).
const (
	FoldWindow = time.Minute
	foldKeys   = 256
)

// fold is one refusal being folded: the record that was written, when,
// and how many identical ones followed.
type fold struct {
	rec  Record
	last time.Time
	n    int
}

// Recorder receives every record; it must not block for long.
type Recorder interface {
	RecordEgress(Record)
}

// Run is what one run may reach.
type Run struct {
	ID, Agent string
	// Command is what the run runs, as approvers are shown it.
	Command  string
	Patterns []Pattern
	// Ask puts names on no pattern to the Asker.
	Ask bool
	// FallbackAllow lets an unanswered question through once
	// (askFallback=full); otherwise it is refused.
	FallbackAllow bool
}

// Proxy is the egress proxy. The zero value is not usable: call New.
type Proxy struct {
	resolver    Resolver
	asker       Asker
	recorder    Recorder
	now         func() time.Time
	askTimeout  time.Duration
	dialTimeout time.Duration
	maxPending  int
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)

	mu     sync.Mutex
	leases map[*Lease]struct{}
	// byID are the leases on the shared listener (Register, Serve);
	// stranger records refusals there that name no run; servers are the
	// shared listeners' servers.
	byID     map[string]*Lease
	stranger *Lease
	servers  []*http.Server
	closed   bool
	wg       sync.WaitGroup
}

// Option configures New.
type Option func(*Proxy)

// WithResolver sets the resolver (default net.DefaultResolver).
func WithResolver(r Resolver) Option { return func(p *Proxy) { p.resolver = r } }

// WithAsker sets the asker; without one an ask goes to the fallback.
func WithAsker(a Asker) Option { return func(p *Proxy) { p.asker = a } }

// WithRecorder sets the recorder (default: records are dropped).
func WithRecorder(r Recorder) Option { return func(p *Proxy) { p.recorder = r } }

// WithClock sets the clock for record times.
func WithClock(now func() time.Time) Option { return func(p *Proxy) { p.now = now } }

// WithAskTimeout bounds a question (default 2 minutes).
func WithAskTimeout(d time.Duration) Option { return func(p *Proxy) { p.askTimeout = d } }

// WithMaxPending bounds the questions one run may have open at once
// (default 4): a run that opens connections to many unlisted names gets
// the rest refused at once instead of flooding the approvers.
func WithMaxPending(n int) Option { return func(p *Proxy) { p.maxPending = n } }

// WithDialTimeout bounds a dial to the server (default 15 seconds).
func WithDialTimeout(d time.Duration) Option { return func(p *Proxy) { p.dialTimeout = d } }

// New makes a proxy; it serves nothing until Attach.
func New(opts ...Option) *Proxy {
	p := &Proxy{
		resolver:    net.DefaultResolver,
		now:         time.Now,
		askTimeout:  2 * time.Minute,
		dialTimeout: 15 * time.Second,
		maxPending:  4,
		leases:      map[*Lease]struct{}{},
	}
	for _, o := range opts {
		o(p)
	}
	d := &net.Dialer{}
	p.dial = d.DialContext
	return p
}

// Lease is one run's listener on the proxy.
type Lease struct {
	p     *Proxy
	ln    net.Listener
	srv   *http.Server
	token string

	mu       sync.Mutex
	run      Run
	conns    map[net.Conn]struct{}
	pending  int // questions open
	folds    map[string]*fold
	closed   bool
	closeErr error
	once     sync.Once
}

// Attach serves run on ln (a unix socket or a loopback TCP listener the
// owner made for this run alone) until the lease or the proxy is closed.
// The lease owns ln.
func (p *Proxy) Attach(ln net.Listener, run Run) (*Lease, error) {
	if run.ID == "" {
		ln.Close()
		return nil, hint.Wrap(errors.New("egress: attach: a run without an id"), "give every run its id so its connections are on the record")
	}
	tok, err := newToken()
	if err != nil {
		ln.Close()
		return nil, err
	}
	run.Patterns = append([]Pattern(nil), run.Patterns...)
	l := &Lease{p: p, ln: ln, token: tok, run: run, conns: map[net.Conn]struct{}{}, folds: map[string]*fold{}}
	l.srv = &http.Server{
		Handler:           l,
		ReadHeaderTimeout: 30 * time.Second,
		ConnState:         l.connState,
		ErrorLog:          nil,
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		ln.Close()
		return nil, errors.New("egress: attach: the proxy is closed")
	}
	p.leases[l] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		_ = l.srv.Serve(ln)
	}()
	return l, nil
}

// newToken is a fresh lease secret.
func newToken() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("egress: token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// Token is the secret the run sends as Proxy-Authorization (user = run
// id, password = token).
func (l *Lease) Token() string { return l.token }

// ProxyURL is the value of HTTP(S)_PROXY for a TCP lease, credentials
// included; "" for a unix socket lease (a client reaches that through a
// relay the jail provides, with the same credentials).
func (l *Lease) ProxyURL() string {
	if l.ln == nil || l.ln.Addr().Network() != "tcp" {
		return ""
	}
	return "http://" + l.run.ID + ":" + l.token + "@" + l.ln.Addr().String()
}

// Patterns returns the run's list now, allow-always additions included.
func (l *Lease) Patterns() []Pattern {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Pattern(nil), l.run.Patterns...)
}

// Close stops the run's listener and cuts its open connections.
func (l *Lease) Close() error {
	l.once.Do(func() {
		l.mu.Lock()
		l.closed = true
		for c := range l.conns {
			c.Close()
		}
		l.mu.Unlock()
		if l.srv != nil {
			l.closeErr = l.srv.Close()
		}
		l.flushFolds()
		l.p.mu.Lock()
		delete(l.p.leases, l)
		if l.p.byID[l.run.ID] == l {
			delete(l.p.byID, l.run.ID)
		}
		l.p.mu.Unlock()
	})
	return l.closeErr
}

// Close closes every lease and waits for their connections to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	ls := make([]*Lease, 0, len(p.leases))
	for l := range p.leases {
		ls = append(ls, l)
	}
	// A copy: Serve removes its server from p.servers in place when its
	// listener closes.
	srvs, stranger := slices.Clone(p.servers), p.stranger
	p.mu.Unlock()
	for _, l := range ls {
		l.Close()
	}
	for _, s := range srvs {
		s.Close()
	}
	if stranger != nil {
		stranger.Close()
	}
	p.wg.Wait()
	return nil
}

func (l *Lease) connState(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch s {
	case http.StateNew:
		if l.closed {
			c.Close()
			return
		}
		l.conns[c] = struct{}{}
	case http.StateClosed:
		delete(l.conns, c)
	}
}

// track keeps a hijacked connection so Close can cut it; false when the
// lease is closing.
func (l *Lease) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *Lease) untrack(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// authorized checks Proxy-Authorization against this lease's run.
func (l *Lease) authorized(r *http.Request) bool {
	v := r.Header.Get("Proxy-Authorization")
	enc, ok := strings.CutPrefix(v, "Basic ")
	if !ok {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return false
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	okUser := subtle.ConstantTimeCompare([]byte(user), []byte(l.run.ID))
	okPass := subtle.ConstantTimeCompare([]byte(pass), []byte(l.token))
	return ok && l.token != "" && okUser&okPass == 1
}

// verdict is the outcome of deciding one connection.
type verdict struct {
	rule    string // set when allowed
	refused string // set when refused
	addrs   []netip.Addr
}

// decide applies the run's list, the asker and the address rule.
func (l *Lease) decide(ctx context.Context, t Target) verdict {
	l.mu.Lock()
	run := l.run
	pats := run.Patterns
	l.mu.Unlock()
	var pat *Pattern
	for i := range pats {
		if pats[i].Match(t) {
			pat = &pats[i]
			break
		}
	}
	var v verdict
	private := false
	if pat != nil {
		v.rule, private = pat.String(), pat.Private
	} else {
		if !run.Ask {
			return verdict{refused: fmt.Sprintf("%s is on no egress pattern of agent %q", t, run.Agent)}
		}
		d, how := l.ask(ctx, t)
		switch d {
		case AllowOnce:
			v.rule = "approval allow-once" + how
		case AllowAlways:
			v.rule = "approval allow-always"
			add := Pattern{Host: t.Host, Port: t.Port, IP: t.IP, Private: t.IP.IsValid()}
			l.mu.Lock()
			l.run.Patterns = append(l.run.Patterns, add)
			l.mu.Unlock()
		default:
			return verdict{refused: fmt.Sprintf("%s is on no egress pattern and was denied%s", t, how)}
		}
	}
	if t.IP.IsValid() {
		// A literal is reached only through an IP pattern or an approval
		// that showed the address itself: nothing was resolved behind
		// anyone's back, so the address rule has nothing to add.
		v.addrs = []netip.Addr{t.IP}
		return v
	}
	rctx, cancel := context.WithTimeout(ctx, l.p.dialTimeout)
	defer cancel()
	addrs, err := l.p.resolver.LookupNetIP(rctx, "ip", t.Host)
	if err != nil {
		return verdict{refused: fmt.Sprintf("%s does not resolve: %v", t.Host, err)}
	}
	if len(addrs) == 0 {
		return verdict{refused: fmt.Sprintf("%s resolves to no address", t.Host)}
	}
	for _, a := range addrs {
		if why := forbidden(a); why != "" && !private {
			return verdict{refused: fmt.Sprintf("%s resolves to %s, a %s address; the pattern must end in %s to reach it", t.Host, a.Unmap(), why, PrivateSuffix)}
		}
	}
	v.addrs = addrs
	return v
}

// ask puts t to the asker, bounded; how says when the fallback decided.
func (l *Lease) ask(ctx context.Context, t Target) (Decision, string) {
	fallback := func(why string) (Decision, string) {
		if l.run.FallbackAllow {
			return AllowOnce, " (askFallback=full: " + why + ")"
		}
		return Deny, " (askFallback: " + why + ")"
	}
	if l.p.asker == nil {
		return fallback("no approver")
	}
	l.mu.Lock()
	if l.pending >= l.p.maxPending {
		l.mu.Unlock()
		return Deny, fmt.Sprintf(" (not asked: the run already has %d questions open)", l.p.maxPending)
	}
	l.pending++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.pending--
		l.mu.Unlock()
	}()
	actx, cancel := context.WithTimeout(ctx, l.p.askTimeout)
	defer cancel()
	d, err := l.p.asker.AskEgress(actx, Question{RunID: l.run.ID, AgentID: l.run.Agent, Command: l.run.Command, Target: t})
	if err != nil {
		return fallback("no answer: " + err.Error())
	}
	return d, ""
}

// dialChecked dials the first checked address that answers.
func (l *Lease) dialChecked(ctx context.Context, v verdict, port int) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, l.p.dialTimeout)
	defer cancel()
	var errs []error
	for _, a := range v.addrs {
		c, err := l.p.dial(ctx, "tcp", netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func (l *Lease) record(rec Record) {
	rec.RunID, rec.AgentID = l.run.ID, l.run.Agent
	// What a client asked for is untrusted: bound it on the record.
	if len(rec.Host) > 255 {
		rec.Host = rec.Host[:255] + "…"
	}
	now := l.p.now()
	rec.Duration = now.Sub(rec.Start)
	if l.p.recorder == nil {
		return
	}
	if !rec.Allowed && l.foldRefusal(&rec, now) {
		return
	}
	l.p.recorder.RecordEgress(rec)
}

// foldRefusal reports whether rec repeats a refusal recorded less than
// FoldWindow ago (it is then only counted); otherwise it carries the
// count of the repeats since that record. A run refused in a loop (or a
// stranger guessing tokens) thus cannot push older records out of a log
// that rotates by size.
func (l *Lease) foldRefusal(rec *Record, now time.Time) bool {
	key := rec.Method + " " + rec.Host + " " + strconv.Itoa(rec.Port) + " " + rec.Refused + " " + rec.Error
	l.mu.Lock()
	defer l.mu.Unlock()
	f, ok := l.folds[key]
	if !ok && len(l.folds) >= foldKeys {
		key = "overflow"
		f, ok = l.folds[key]
	}
	if ok && now.Sub(f.last) < FoldWindow {
		f.n++
		return true
	}
	if ok {
		rec.Repeats = f.n
	}
	l.folds[key] = &fold{rec: *rec, last: now}
	return false
}

// flushFolds records the repeats not yet on the record when the lease
// ends.
func (l *Lease) flushFolds() {
	l.mu.Lock()
	var out []Record
	for _, f := range l.folds {
		if f.n > 0 {
			r := f.rec
			r.Repeats, r.Up, r.Down = f.n, 0, 0
			out = append(out, r)
		}
	}
	l.folds = map[string]*fold{}
	l.mu.Unlock()
	if l.p.recorder != nil {
		for _, r := range out {
			l.p.recorder.RecordEgress(r)
		}
	}
}

// ServeHTTP handles one request on the run's listener.
func (l *Lease) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := Record{Start: l.p.now(), Method: r.Method}
	if !l.authorized(r) {
		rec.Refused = "no valid Proxy-Authorization for run " + l.run.ID
		rec.Host = r.Host
		l.record(rec)
		w.Header().Set("Proxy-Authenticate", `Basic realm="exechost egress"`)
		http.Error(w, "exechost egress: proxy credentials missing or wrong for this run", http.StatusProxyAuthRequired)
		return
	}
	if r.Method == http.MethodConnect {
		l.connect(w, r, rec)
		return
	}
	l.plain(w, r, rec)
}

func (l *Lease) refuse(w http.ResponseWriter, rec Record, code int, why string) {
	rec.Refused = why
	l.record(rec)
	http.Error(w, "exechost egress: "+why, code)
}

// open decides on the target hostport names (defPort when it names
// none) and dials it, filling rec; a refusal or a failed dial is recorded
// and answered on w, and open reports false.
func (l *Lease) open(w http.ResponseWriter, r *http.Request, rec *Record, hostport string, defPort int) (net.Conn, bool) {
	t, err := parseTarget(hostport, defPort)
	if err != nil {
		rec.Host = hostport
		l.refuse(w, *rec, http.StatusBadRequest, err.Error())
		return nil, false
	}
	rec.Host, rec.Port = t.Host, t.Port
	v := l.decide(r.Context(), t)
	if v.refused != "" {
		l.refuse(w, *rec, http.StatusForbidden, v.refused)
		return nil, false
	}
	rec.Allowed, rec.Rule = true, v.rule
	c, err := l.dialChecked(r.Context(), v, t.Port)
	if err != nil {
		rec.Error = err.Error()
		l.record(*rec)
		http.Error(w, "exechost egress: "+t.String()+" is allowed but the dial failed: "+err.Error(), http.StatusBadGateway)
		return nil, false
	}
	return c, true
}

func (l *Lease) connect(w http.ResponseWriter, r *http.Request, rec Record) {
	up, ok := l.open(w, r, &rec, r.RequestURI, 0)
	if !ok {
		return
	}
	rec.Addr = up.RemoteAddr().String()
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		rec.Error = "the connection cannot be taken over"
		l.record(rec)
		http.Error(w, "exechost egress: CONNECT over this protocol is not supported", http.StatusHTTPVersionNotSupported)
		return
	}
	cc, brw, err := hj.Hijack()
	if err != nil {
		up.Close()
		rec.Error = err.Error()
		l.record(rec)
		return
	}
	if !l.track(cc) {
		cc.Close()
		up.Close()
		rec.Error = "the run's proxy lease closed"
		l.record(rec)
		return
	}
	defer l.untrack(cc)
	l.track(up)
	defer l.untrack(up)
	if _, err := io.WriteString(cc, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		cc.Close()
		up.Close()
		rec.Error = err.Error()
		l.record(rec)
		return
	}
	// Bytes the client sent after the CONNECT head are in brw's buffer.
	var client io.Reader = cc
	if n := brw.Reader.Buffered(); n > 0 {
		client = io.MultiReader(io.LimitReader(brw.Reader, int64(n)), cc)
	}
	var upN, downN atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		n, _ := io.Copy(up, client)
		upN.Store(n)
		closeWrite(up)
	}()
	n, err := io.Copy(cc, up)
	downN.Store(n)
	closeWrite(cc)
	wg.Wait()
	cc.Close()
	up.Close()
	rec.Up, rec.Down = upN.Load(), downN.Load()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		rec.Error = err.Error()
	}
	l.record(rec)
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// hopHeaders are not forwarded: they describe the hop to the proxy (the
// run's proxy token among them).
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authorization", "Proxy-Authenticate", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (l *Lease) plain(w http.ResponseWriter, r *http.Request, rec Record) {
	if r.URL.Scheme != "http" || r.URL.Host == "" {
		rec.Host = r.Host
		l.refuse(w, rec, http.StatusBadRequest, "a plain request must name an http:// URL (use CONNECT for https)")
		return
	}
	raw, ok := l.open(w, r, &rec, r.URL.Host, 80)
	if !ok {
		return
	}
	up := &countConn{Conn: raw}
	defer up.Close()
	rec.Addr = raw.RemoteAddr().String()
	out := r.Clone(r.Context())
	out.RequestURI = ""
	// The server sees the name that was checked: a Host header naming
	// another site (which a shared front end could route to) is replaced,
	// as RFC 9112 has a proxy do for an absolute-form request.
	out.Host = r.URL.Host
	out.Close = true
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	for _, h := range strings.Split(r.Header.Get("Connection"), ",") {
		if h = strings.TrimSpace(h); h != "" {
			out.Header.Del(h)
		}
	}
	if err := out.Write(up); err != nil {
		rec.Error = err.Error()
		rec.Up, rec.Down = up.up.Load(), up.down.Load()
		l.record(rec)
		http.Error(w, "exechost egress: sending the request: "+err.Error(), http.StatusBadGateway)
		return
	}
	resp, err := http.ReadResponse(bufio.NewReader(up), out)
	if err != nil {
		rec.Error = err.Error()
		rec.Up, rec.Down = up.up.Load(), up.down.Load()
		l.record(rec)
		http.Error(w, "exechost egress: reading the response: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	if resp.ContentLength >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w.WriteHeader(resp.StatusCode)
	if _, err := io.Copy(w, resp.Body); err != nil {
		rec.Error = err.Error()
	}
	rec.Up, rec.Down = up.up.Load(), up.down.Load()
	l.record(rec)
}

// countConn counts the bytes written (up) and read (down).
type countConn struct {
	net.Conn
	up, down atomic.Int64
}

func (c *countConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.down.Add(int64(n))
	return n, err
}

func (c *countConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.up.Add(int64(n))
	return n, err
}
