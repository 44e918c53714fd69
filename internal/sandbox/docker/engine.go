package docker

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/exechost/exechost/internal/hint"
)

// The Docker Engine API over plain HTTP, for the dozen calls this backend
// makes. The moby client package was used before: its dependencies'
// package initialisation (github.com/distribution/reference compiles its
// regular expressions, about 1.2 ms and 3,600 allocations) ran at every
// start of the one binary — each CLI call, the interpreter, the confining
// launcher — not only in a gateway with a Docker sandbox (issue 31).
// The request and response shapes below are the parts of moby's api
// types this backend sets or reads, with their JSON names: the api types
// package itself links github.com/opencontainers/go-digest (another
// 0.2 ms of package init).

// containerConfig is a container's configuration (the Engine API's
// ContainerConfig, with its HostConfig), as far as this backend sets it.
type containerConfig struct {
	Hostname        string
	User            string
	AttachStdin     bool
	AttachStdout    bool
	AttachStderr    bool
	OpenStdin       bool
	StdinOnce       bool
	Cmd             []string
	Image           string
	WorkingDir      string
	Entrypoint      []string
	NetworkDisabled bool `json:",omitempty"`
	Labels          map[string]string
	HostConfig      *hostConfig `json:",omitempty"`
}

// hostConfig is the Engine API's HostConfig, as far as this backend sets
// it (Memory to PidsLimit are its inlined Resources).
type hostConfig struct {
	Mounts         []mountSpec `json:",omitempty"`
	NetworkMode    string
	ReadonlyRootfs bool
	CapDrop        []string
	SecurityOpt    []string
	Tmpfs          map[string]string `json:",omitempty"`
	RestartPolicy  struct{ Name string }
	LogConfig      struct{ Type string }
	Memory         int64
	MemorySwap     int64
	NanoCPUs       int64 `json:"NanoCpus"`
	PidsLimit      *int64
}

// mountSpec is one of HostConfig's Mounts.
type mountSpec struct {
	Type     string `json:",omitempty"`
	Source   string `json:",omitempty"`
	Target   string `json:",omitempty"`
	ReadOnly bool   `json:",omitempty"`
}

// execConfig is the Engine API's ExecConfig, as far as this backend sets
// it.
type execConfig struct {
	User         string
	AttachStdout bool
	AttachStderr bool
	Env          []string
	WorkingDir   string
	Cmd          []string
}

// execState is what this backend reads of an exec's inspection.
type execState struct {
	Running  bool
	ExitCode *int
}

// containerState is what this backend reads of a container's inspection.
type containerState struct {
	State *struct{ Running bool }
}

// idResponse is the answer of a create call.
type idResponse struct {
	ID string `json:"Id"`
}

// Engine API versions: the newest this client speaks (what the moby
// client it replaced sent) and the oldest it accepts from a daemon.
const (
	maxAPIVersion = "1.56"
	minAPIVersion = "1.40"
)

// defaultDockerHost is the daemon's socket when neither the configuration
// nor $DOCKER_HOST names one.
const defaultDockerHost = "unix:///var/run/docker.sock"

// Engine is a client of one Docker daemon's Engine API. It is safe for
// concurrent use once Ping has negotiated the API version.
type Engine struct {
	host    string // as given: unix:///path or tcp://addr
	version string // negotiated by Ping; $DOCKER_API_VERSION pins it
	pinned  bool
	scheme  string // http or https
	addr    string // host:port for the URL; a placeholder for a socket
	dial    func(ctx context.Context) (net.Conn, error)
	tls     *tls.Config
	http    *http.Client
}

// engineError is the daemon's refusal of one call: its HTTP status and
// message.
type engineError struct {
	status int
	msg    string
}

func (e *engineError) Error() string {
	return fmt.Sprintf("Error response from daemon (%d): %s", e.status, e.msg)
}

// errConnectionFailed marks a call that reached no daemon.
var errConnectionFailed = errors.New("cannot connect to the Docker daemon")

// isStatus reports whether err is the daemon's answer with that status.
func isStatus(err error, status int) bool {
	var e *engineError
	return errors.As(err, &e) && e.status == status
}

func isNotFound(err error) bool { return isStatus(err, http.StatusNotFound) }

func isConflict(err error) bool { return isStatus(err, http.StatusConflict) }

// newEngine returns a client for host (empty: $DOCKER_HOST, else the
// default socket), with TLS from $DOCKER_CERT_PATH and $DOCKER_TLS_VERIFY
// and a pinned version from $DOCKER_API_VERSION, as the Docker CLI reads
// them. It does not connect.
func newEngine(host string) (*Engine, error) {
	if host == "" {
		host = os.Getenv("DOCKER_HOST")
	}
	if host == "" {
		host = defaultDockerHost
	}
	e := &Engine{host: host, version: maxAPIVersion, scheme: "http"}
	if v := os.Getenv("DOCKER_API_VERSION"); v != "" {
		e.version, e.pinned = strings.TrimPrefix(v, "v"), true
	}
	proto, addr, ok := strings.Cut(host, "://")
	if !ok || addr == "" {
		return nil, fmt.Errorf("docker host %q: want unix:///path or tcp://host:port", host)
	}
	var d net.Dialer
	switch proto {
	case "unix":
		e.addr = "docker" // unused by the dialer; the URL needs a host
		e.dial = func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "unix", addr) }
	case "tcp", "http", "https":
		addr, _, _ = strings.Cut(addr, "/")
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("docker host %q: %w", host, err)
		}
		e.addr = addr
		e.dial = func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	default:
		return nil, hint.Wrap(fmt.Errorf("docker host %q: protocol %s is not supported", host, proto), "unix:// or tcp://")
	}
	if dir := os.Getenv("DOCKER_CERT_PATH"); dir != "" {
		cfg, err := tlsFromDir(dir, os.Getenv("DOCKER_TLS_VERIFY") == "")
		if err != nil {
			return nil, err
		}
		e.tls, e.scheme = cfg, "https"
	} else if proto == "https" {
		e.tls, e.scheme = &tls.Config{MinVersion: tls.VersionTLS12}, "https"
	}
	e.http = &http.Client{Transport: &http.Transport{
		DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return e.dial(ctx) },
		TLSClientConfig:     e.tls,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     90 * time.Second,
	}}
	return e, nil
}

// tlsFromDir reads ca.pem, cert.pem and key.pem from dir, as the Docker
// CLI does for $DOCKER_CERT_PATH.
func tlsFromDir(dir string, insecure bool) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure} //nolint:gosec // $DOCKER_TLS_VERIFY unset asks for it, as with the Docker CLI
	if ca, err := os.ReadFile(filepath.Join(dir, "ca.pem")); err == nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("docker TLS: no certificate in %s", filepath.Join(dir, "ca.pem"))
		}
		cfg.RootCAs = pool
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("docker TLS: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	switch {
	case err == nil:
		cfg.Certificates = []tls.Certificate{cert}
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("docker TLS from DOCKER_CERT_PATH=%s: %w", dir, err)
	}
	return cfg, nil
}

// DaemonHost returns the daemon address this client talks to.
func (e *Engine) DaemonHost() string { return e.host }

// ClientVersion returns the API version the calls use.
func (e *Engine) ClientVersion() string { return e.version }

// Close drops idle connections.
func (e *Engine) Close() error {
	e.http.CloseIdleConnections()
	return nil
}

// Ping checks that the daemon answers and, unless $DOCKER_API_VERSION
// pins it, lowers the API version to the daemon's when that is older.
func (e *Engine) Ping(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.scheme+"://"+e.addr+"/_ping", nil)
	if err != nil {
		return err
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w at %s: %w", errConnectionFailed, e.host, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode >= 400 {
		return &engineError{status: resp.StatusCode, msg: "ping: " + resp.Status}
	}
	v := resp.Header.Get("Api-Version")
	if e.pinned || v == "" {
		return nil
	}
	if versionLess(v, minAPIVersion) {
		return fmt.Errorf("the daemon speaks Engine API %s; this client needs at least %s", v, minAPIVersion)
	}
	if versionLess(v, e.version) {
		e.version = v
	}
	return nil
}

// versionLess compares dotted API versions ("1.9" < "1.10").
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// request builds a call of path (without the version prefix) with query
// and a JSON body (nil: none).
func (e *Engine) request(ctx context.Context, method, path string, query url.Values, body any) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		r = bytes.NewReader(b)
	}
	u := e.scheme + "://" + e.addr + "/v" + e.version + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// do makes one call and decodes a JSON answer into out (nil: discarded).
// A status of 400 or more is an *engineError with the daemon's message.
func (e *Engine) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	req, err := e.request(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	resp, err := e.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		return fmt.Errorf("%w at %s: %w", errConnectionFailed, e.host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return responseError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(out); err != nil {
		return fmt.Errorf("decode %s %s: %w", method, path, err)
	}
	return nil
}

// responseError reads the daemon's {"message": …} refusal.
func responseError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var m struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &m) != nil || m.Message == "" {
		m.Message = strings.TrimSpace(string(b))
	}
	if m.Message == "" {
		m.Message = resp.Status
	}
	return &engineError{status: resp.StatusCode, msg: m.Message}
}

// hijacked is an attach stream: the daemon's multiplexed output on Reader
// (stdcopy framing), stdin written to Conn.
type hijacked struct {
	Conn   net.Conn
	Reader *bufio.Reader
}

// Close closes the connection.
func (h hijacked) Close() { h.Conn.Close() }

// hijack makes a call the daemon answers by taking the connection over
// (attach, exec start): an HTTP/1.1 upgrade on a connection of its own,
// not tied to ctx once established.
func (e *Engine) hijack(ctx context.Context, path string, query url.Values, body any) (hijacked, error) {
	req, err := e.request(ctx, http.MethodPost, path, query, body)
	if err != nil {
		return hijacked{}, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "tcp")
	conn, err := e.dial(ctx)
	if err != nil {
		return hijacked{}, fmt.Errorf("%w at %s: %w", errConnectionFailed, e.host, err)
	}
	if e.tls != nil {
		cfg := e.tls.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(e.addr)
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return hijacked{}, fmt.Errorf("docker TLS handshake: %w", err)
		}
		conn = tc
	}
	// The handshake is bounded by ctx; the stream after it is not.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	br := bufio.NewReader(conn)
	resp, err := func() (*http.Response, error) {
		if err := req.Write(conn); err != nil {
			return nil, err
		}
		return http.ReadResponse(br, req)
	}()
	if !stop() || err != nil {
		conn.Close()
		if err == nil {
			err = ctx.Err()
		}
		return hijacked{}, fmt.Errorf("POST %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols && resp.StatusCode != http.StatusOK {
		defer conn.Close()
		return hijacked{}, responseError(resp)
	}
	return hijacked{Conn: conn, Reader: br}, nil
}

// ImageInspect fails (isNotFound) when image is not on the daemon.
func (e *Engine) ImageInspect(ctx context.Context, image string) error {
	return e.do(ctx, http.MethodGet, "/images/"+url.PathEscape(image)+"/json", nil, nil, nil)
}

// ContainerCreate creates container name and returns its id.
func (e *Engine) ContainerCreate(ctx context.Context, name string, cfg *containerConfig) (string, error) {
	var res idResponse
	err := e.do(ctx, http.MethodPost, "/containers/create", url.Values{"name": {name}}, cfg, &res)
	return res.ID, err
}

// ContainerStart starts a created container.
func (e *Engine) ContainerStart(ctx context.Context, id string) error {
	return e.do(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/start", nil, nil, nil)
}

// ContainerRemove force-removes a container and its anonymous volumes.
func (e *Engine) ContainerRemove(ctx context.Context, id string) error {
	return e.do(ctx, http.MethodDelete, "/containers/"+url.PathEscape(id), url.Values{"force": {"1"}, "v": {"1"}}, nil, nil)
}

// ContainerList lists every container (running or not) carrying all of
// the labels ("key=value").
func (e *Engine) ContainerList(ctx context.Context, labels ...string) ([]idResponse, error) {
	filters, err := json.Marshal(map[string][]string{"label": labels})
	if err != nil {
		return nil, err
	}
	var list []idResponse
	err = e.do(ctx, http.MethodGet, "/containers/json", url.Values{"all": {"1"}, "filters": {string(filters)}}, nil, &list)
	return list, err
}

// ContainerInspect returns a container's state.
func (e *Engine) ContainerInspect(ctx context.Context, id string) (containerState, error) {
	var res containerState
	err := e.do(ctx, http.MethodGet, "/containers/"+url.PathEscape(id)+"/json", nil, nil, &res)
	return res, err
}

// ContainerAttach attaches to a container's stdin, stdout and stderr.
func (e *Engine) ContainerAttach(ctx context.Context, id string) (hijacked, error) {
	q := url.Values{"stream": {"1"}, "stdin": {"1"}, "stdout": {"1"}, "stderr": {"1"}}
	return e.hijack(ctx, "/containers/"+url.PathEscape(id)+"/attach", q, nil)
}

// ExecCreate creates an exec in container id and returns its id.
func (e *Engine) ExecCreate(ctx context.Context, id string, req execConfig) (string, error) {
	var res idResponse
	err := e.do(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/exec", nil, req, &res)
	return res.ID, err
}

// ExecAttach starts exec id attached to its output.
func (e *Engine) ExecAttach(ctx context.Context, id string) (hijacked, error) {
	return e.hijack(ctx, "/exec/"+url.PathEscape(id)+"/start", nil, struct{ Detach, Tty bool }{})
}

// ExecStartDetached starts exec id without attaching.
func (e *Engine) ExecStartDetached(ctx context.Context, id string) error {
	return e.do(ctx, http.MethodPost, "/exec/"+url.PathEscape(id)+"/start", nil, struct{ Detach, Tty bool }{Detach: true}, nil)
}

// ExecInspect returns whether exec id runs and its exit code.
func (e *Engine) ExecInspect(ctx context.Context, id string) (execState, error) {
	var res execState
	err := e.do(ctx, http.MethodGet, "/exec/"+url.PathEscape(id)+"/json", nil, nil, &res)
	return res, err
}
