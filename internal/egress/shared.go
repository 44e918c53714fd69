package egress

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/exechost/exechost/internal/hint"
)

// One listener for many runs: Serve takes connections for every run
// Registered on the proxy and hands each request to the run its
// Proxy-Authorization names (user = run id, password = that run's token),
// which then checks the token as an attached lease does. A jail relays
// its runs' connections to this one listener (internal/jail's egress
// forwarder), so a run's identity is its credentials alone: a run that
// holds another run's token speaks as that run, which is why the token is
// only in that run's environment.

// Register makes a lease for run on the proxy's shared listener (Serve);
// the lease has no listener of its own. Close it when the run ends.
func (p *Proxy) Register(run Run) (*Lease, error) {
	if run.ID == "" || strings.ContainsAny(run.ID, ":\r\n") {
		return nil, hint.Wrap(fmt.Errorf("egress: register: run id %q", run.ID), "give every run an id without ':' so its connections are on the record")
	}
	tok, err := newToken()
	if err != nil {
		return nil, err
	}
	run.Patterns = append([]Pattern(nil), run.Patterns...)
	l := &Lease{p: p, token: tok, run: run, conns: map[net.Conn]struct{}{}, folds: map[string]*fold{}}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("egress: register: the proxy is closed")
	}
	if p.byID == nil {
		p.byID = map[string]*Lease{}
	}
	if _, dup := p.byID[run.ID]; dup {
		return nil, fmt.Errorf("egress: register: run %s already has a lease", run.ID)
	}
	p.byID[run.ID] = l
	p.leases[l] = struct{}{}
	return l, nil
}

// Serve serves the shared listener until the proxy is closed; it owns ln.
func (p *Proxy) Serve(ln net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		ln.Close()
		return errors.New("egress: serve: the proxy is closed")
	}
	if p.stranger == nil {
		// Refusals of connections no run's credentials name are recorded
		// (and folded) as one pseudo-run's.
		p.stranger = &Lease{p: p, run: Run{ID: "(no run)"}, conns: map[net.Conn]struct{}{}, folds: map[string]*fold{}}
	}
	srv := &http.Server{Handler: http.HandlerFunc(p.dispatch), ReadHeaderTimeout: 30 * time.Second}
	p.servers = append(p.servers, srv)
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	err := srv.Serve(ln)
	// A listener closed by its owner (a sandbox's socket, removed with
	// the sandbox) ends its server here, so a long-lived proxy does not
	// keep one per sandbox it ever served.
	p.mu.Lock()
	p.servers = slices.DeleteFunc(p.servers, func(s *http.Server) bool { return s == srv })
	p.mu.Unlock()
	srv.Close()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// ProxyURLAt is the HTTP(S)_PROXY value for a run reaching the proxy at
// addr (host:port), credentials included.
func (l *Lease) ProxyURLAt(addr string) string {
	return "http://" + l.run.ID + ":" + l.token + "@" + addr
}

// RunID is the run the lease is for.
func (l *Lease) RunID() string { return l.run.ID }

// dispatch hands r to the lease its credentials name.
func (p *Proxy) dispatch(w http.ResponseWriter, r *http.Request) {
	user := proxyUser(r)
	p.mu.Lock()
	l := p.byID[user]
	stranger := p.stranger
	p.mu.Unlock()
	if l == nil {
		l = stranger
	}
	l.ServeHTTP(w, r)
}

// proxyUser is the user of r's Proxy-Authorization, "" without one.
func proxyUser(r *http.Request) string {
	enc, ok := strings.CutPrefix(r.Header.Get("Proxy-Authorization"), "Basic ")
	if !ok {
		return ""
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return ""
	}
	user, _, _ := strings.Cut(string(raw), ":")
	return user
}
