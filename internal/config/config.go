// Package config loads the gateway's exechost.json: JSON with comments
// (hujson), strict about keys and values so that a typo is an error naming
// the key's path instead of a setting silently ignored — for a security
// tool, an ignored "security" key would mean a default the user did not
// choose.
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"strings"

	"github.com/tailscale/hujson"

	"github.com/exechost/exechost/internal/hint"
	"github.com/exechost/exechost/internal/policy"
	"github.com/exechost/exechost/internal/sandbox"
)

// DefaultListen is the gateway's default listen address: loopback only.
const DefaultListen = "127.0.0.1:18789"

// MaxSize bounds the config file read.
const MaxSize = 1 << 20

// ErrInvalid is wrapped by every error about the file's content.
var ErrInvalid = errors.New("invalid config")

// Exec is a tools.exec object.
type Exec struct {
	Host     string `json:"host,omitempty"`
	Security string `json:"security,omitempty"`
	Ask      string `json:"ask,omitempty"`
	Node     string `json:"node,omitempty"`
	// DefaultNode is the node an exec without a node goes to when several
	// are paired. Unlike Node it restricts nothing: a request naming
	// another node is served. `exechost up` writes its local node here, so
	// pairing a second node does not turn every plain exec into
	// NODE_REQUIRED.
	DefaultNode string `json:"defaultNode,omitempty"`
}

// Settings returns e as a policy layer.
func (e Exec) Settings() policy.Settings {
	return policy.Settings{Host: policy.Host(e.Host), Security: policy.Security(e.Security), Ask: policy.Ask(e.Ask), Node: e.Node}
}

// Tools is the tools object.
type Tools struct {
	Exec Exec `json:"exec"`
}

// Agent is one agents.list entry.
type Agent struct {
	ID    string `json:"id"`
	Tools Tools  `json:"tools"`
}

// Agents is the agents object.
type Agents struct {
	List []Agent `json:"list"`
}

// TLS names the gateway's certificate and key (PEM files); with both set
// the gateway serves wss://.
type TLS struct {
	Cert string `json:"cert,omitempty"`
	Key  string `json:"key,omitempty"`
}

// Gateway is the gateway object.
type Gateway struct {
	// Listen is host:port; DefaultListen when empty.
	Listen string `json:"listen,omitempty"`
	TLS    TLS    `json:"tls"`
	// AllowedOrigins are the browser origins, besides loopback ones
	// ("http://127.0.0.1:3000", "http://localhost:8080"), allowed to open
	// a WebSocket: a full origin ("https://ops.example", globs allowed) or
	// a host pattern ("ops.example", "*.ops.example"). A request without
	// an Origin header is not from a browser page and is not limited by
	// this list. An Origin merely equal to the Host header is not enough:
	// that is what a DNS-rebinding page sends.
	AllowedOrigins []string `json:"allowedOrigins,omitempty"`
	// AllowedHosts are the names (globs allowed) the gateway answers to in
	// the Host header besides loopback addresses, "localhost" and the IP
	// address a connection arrived on. A name not listed is refused, so a
	// DNS-rebinding page (whose requests carry its own name) never
	// reaches the gateway.
	AllowedHosts []string `json:"allowedHosts,omitempty"`
	// Limits bound the execs in flight; zero values take the defaults.
	Limits Limits `json:"limits"`
}

// Default limits on execs in flight at the gateway. They are far above
// what an agent does on purpose (a few parallel tool calls, a handful of
// background jobs) and stop a runaway loop before it exhausts the
// gateway: every exec in flight holds a goroutine, a session entry and,
// for host=gateway, a process and its pipes, and a background run may
// live for a day.
const (
	DefaultExecsPerAgent = 64
	DefaultExecs         = 256
)

// Limits is the gateway.limits object.
type Limits struct {
	// ExecsPerAgent bounds one agent's execs in flight (foreground and
	// background, on every host); DefaultExecsPerAgent when 0.
	ExecsPerAgent int `json:"execsPerAgent,omitempty"`
	// Execs bounds all agents' execs in flight together; DefaultExecs
	// when 0.
	Execs int `json:"execs,omitempty"`
}

// WithDefaults returns l with zero values replaced by the defaults.
func (l Limits) WithDefaults() Limits {
	if l.ExecsPerAgent == 0 {
		l.ExecsPerAgent = DefaultExecsPerAgent
	}
	if l.Execs == 0 {
		l.Execs = DefaultExecs
	}
	return l
}

// Approvals is the approvals object: how the gateway process, as the
// host=gateway execution host, asks a human.
type Approvals struct {
	// Route is where prompts go: "local" (the approval socket on this
	// machine; the default), "gateway" (the gateway's operators: the
	// exec.approval.requested event, `exechost approvals pending`, the
	// gateway web UI) or "both" (first answer wins).
	Route string `json:"route,omitempty"`
}

// Telemetry is the telemetry object (docs/tracing.md).
type Telemetry struct {
	OTLP OTLP `json:"otlp"`
}

// OTLP is where the gateway exports exec spans.
type OTLP struct {
	// Endpoint is an OTLP/HTTP URL (http://localhost:4318). Empty leaves
	// tracing to the standard OTEL_EXPORTER_OTLP_* variables, and off
	// when they are unset too.
	Endpoint string `json:"endpoint,omitempty"`
}

// Config is exechost.json.
type Config struct {
	Tools     Tools          `json:"tools"`
	Agents    Agents         `json:"agents"`
	Sandbox   sandbox.Config `json:"sandbox"`
	Gateway   Gateway        `json:"gateway"`
	Approvals Approvals      `json:"approvals"`
	Telemetry Telemetry      `json:"telemetry"`
	// Path is where the config was read from ("" for the built-in one).
	Path string `json:"-"`
}

// Default returns the built-in configuration: everything at its safe
// default, listening on loopback.
func Default() *Config {
	return &Config{Sandbox: sandbox.DefaultConfig(), Gateway: Gateway{Listen: DefaultListen}}
}

// Agent returns the agents.list entry for id, if any.
func (c *Config) Agent(id string) (Agent, bool) {
	for _, a := range c.Agents.List {
		if a.ID == id {
			return a, true
		}
	}
	return Agent{}, false
}

// Layers returns the agent's and the global exec settings, in precedence
// order, for policy.Resolve.
func (c *Config) Layers(agentID string) (agent, global policy.Settings) {
	if a, ok := c.Agent(agentID); ok {
		agent = a.Tools.Exec.Settings()
	}
	return agent, c.Tools.Exec.Settings()
}

// Binding returns the node the agent is bound to by tools.exec.node (the
// agent's own binding wins over the global one), or "".
func (c *Config) Binding(agentID string) string {
	if a, ok := c.Agent(agentID); ok && a.Tools.Exec.Node != "" {
		return a.Tools.Exec.Node
	}
	return c.Tools.Exec.Node
}

// DefaultNode returns the node an exec without a node goes to when
// several are paired (tools.exec.defaultNode, the agent's own wins), or "".
func (c *Config) DefaultNode(agentID string) string {
	if a, ok := c.Agent(agentID); ok && a.Tools.Exec.DefaultNode != "" {
		return a.Tools.Exec.DefaultNode
	}
	return c.Tools.Exec.DefaultNode
}

// Load reads path. A missing file is not an error when missingOK: the
// built-in defaults apply (the quick start runs without one).
func Load(path string, missingOK bool) (*Config, error) {
	data, err := readLimited(path)
	if errors.Is(err, os.ErrNotExist) && missingOK {
		c := Default()
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	c, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	c.Path = path
	return c, nil
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("larger than %d bytes", MaxSize)
	}
	return data, nil
}

// Parse parses and validates a config file's content; name is used in
// error messages.
func Parse(name string, data []byte) (*Config, error) {
	std, err := hujson.Standardize(data)
	if err != nil {
		return nil, hint.Wrap(fmt.Errorf("%w: %s: %v", ErrInvalid, name, err), "exechost.json is JSON with // comments and trailing commas allowed")
	}
	if err := checkKeys("", std, typeOf[Config]()); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
	}
	c := Default()
	c.Sandbox = sandbox.Config{}
	if err := json.Unmarshal(std, c); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("%w: %s: %s: %s is not valid here (want %s)", ErrInvalid, name, te.Field, te.Value, te.Type)
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
	}
	c.Sandbox = c.Sandbox.WithDefaults()
	if c.Gateway.Listen == "" {
		c.Gateway.Listen = DefaultListen
	}
	return c, nil
}

func (c *Config) validate() error {
	var errs []error
	if err := validateExec("tools.exec", &c.Tools.Exec); err != nil {
		errs = append(errs, err)
	}
	seen := map[string]bool{}
	for i := range c.Agents.List {
		a := &c.Agents.List[i]
		where := fmt.Sprintf("agents.list[%d]", i)
		switch {
		case strings.TrimSpace(a.ID) == "":
			errs = append(errs, fmt.Errorf("%s.id: missing (every agent needs an id)", where))
		case seen[a.ID]:
			errs = append(errs, fmt.Errorf("%s.id: duplicate agent id %q", where, a.ID))
		}
		seen[a.ID] = true
		if err := validateExec(where+".tools.exec", &a.Tools.Exec); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.Sandbox.WithDefaults().Validate(); err != nil {
		errs = append(errs, err)
	}
	if ep := c.Telemetry.OTLP.Endpoint; ep != "" {
		if u, err := url.Parse(ep); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, hint.Wrap(fmt.Errorf("telemetry.otlp.endpoint: %q is not an http(s) URL", ep), "OTLP/HTTP, e.g. \"http://localhost:4318\""))
		}
	}
	switch r := strings.ToLower(strings.TrimSpace(c.Approvals.Route)); r {
	case "", "local", "gateway", "both":
		c.Approvals.Route = r
	default:
		errs = append(errs, fmt.Errorf("approvals.route: %w: %q (accepted: local, gateway, both)", policy.ErrInvalidValue, c.Approvals.Route))
	}
	for _, l := range []struct {
		key  string
		list []string
	}{{"gateway.allowedOrigins", c.Gateway.AllowedOrigins}, {"gateway.allowedHosts", c.Gateway.AllowedHosts}} {
		key := l.key
		for i, pat := range l.list {
			if _, err := path.Match(strings.ToLower(pat), ""); err != nil || strings.TrimSpace(pat) == "" {
				errs = append(errs, hint.Wrap(fmt.Errorf("%s[%d]: %q is not a host or origin pattern", key, i, pat), "e.g. \"ops.example\", \"*.ops.example\" or \"https://ops.example\""))
			}
		}
	}
	for _, l := range []struct {
		key string
		n   int
	}{{"gateway.limits.execsPerAgent", c.Gateway.Limits.ExecsPerAgent}, {"gateway.limits.execs", c.Gateway.Limits.Execs}} {
		if l.n < 0 {
			errs = append(errs, hint.Wrap(fmt.Errorf("%s: %w: %d", l.key, policy.ErrInvalidValue, l.n), "a positive number, or 0 or unset for the default"))
		}
	}
	if (c.Gateway.TLS.Cert == "") != (c.Gateway.TLS.Key == "") {
		errs = append(errs, errors.New("gateway.tls: cert and key must be set together"))
	}
	return errors.Join(errs...)
}

// validateExec checks e's enum values and rewrites them in canonical form
// (" Gateway" → "gateway") so later layers compare exact strings.
func validateExec(where string, e *Exec) error {
	var errs []error
	if e.Host != "" {
		h, err := policy.ParseHost(e.Host)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.host: %w", where, err))
		}
		e.Host = string(h)
	}
	if e.Security != "" {
		s, err := policy.ParseSecurity(e.Security)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.security: %w", where, err))
		}
		e.Security = string(s)
	}
	if e.Ask != "" {
		a, err := policy.ParseAsk(e.Ask)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.ask: %w", where, err))
		}
		e.Ask = string(a)
	}
	e.Node = strings.TrimSpace(e.Node)
	e.DefaultNode = strings.TrimSpace(e.DefaultNode)
	return errors.Join(errs...)
}
