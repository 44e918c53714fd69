package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Keywords of sandbox.backend that name no driver. Every other value is
// the Name of a registered Driver ("docker", "bwrap", "kubernetes": each
// backend package exports its own).
const (
	// BackendAuto tries the drivers that take part in auto (Driver.Auto),
	// in their order, else leaves host=sandbox without a backend.
	BackendAuto = "auto"
	// BackendNone disables host=sandbox: every sandbox request fails with
	// ErrNotConfigured (never a host fallback).
	BackendNone = "none"
)

// Scope decides which requests share one sandbox (container, /tmp).
type Scope string

// Scopes accepted in sandbox.scope.
const (
	// ScopeSession gives every (agent, session) pair its own sandbox.
	ScopeSession Scope = "session"
	// ScopeAgent shares one sandbox between all sessions of an agent.
	ScopeAgent Scope = "agent"
	// ScopeShared shares one sandbox (and one workspace) between everyone.
	ScopeShared Scope = "shared"
)

// Defaults applied by DefaultConfig and WithDefaults.
const (
	DefaultImage       = "debian:bookworm-slim"
	DefaultUser        = "65534:65534"
	DefaultMemory      = "512m"
	DefaultCPUs        = 1.0
	DefaultPidsLimit   = 256
	DefaultTmpfsSize   = "64m"
	DefaultIdleTimeout = 30 * time.Minute
	// WorkspaceDir is where the workspace appears inside every sandbox and
	// the default working directory of a command.
	WorkspaceDir = "/workspace"
	// SharedWorkspace is the workspace directory name of ScopeShared. It
	// starts with a dot, which no valid agent id does, so it cannot
	// collide with an agent's own workspace.
	SharedWorkspace = ".shared"
)

// Agent modes (sandbox.agent): how commands reach a sandbox.
const (
	// AgentAuto keeps one sandbox per scope alive with a resident agent
	// inside (the exechost binary, see package sandbox/agent) that forks
	// each command, when the agent binary can run there; otherwise each
	// command costs a runtime exec (docker) or a fresh sandbox (bwrap).
	AgentAuto = "auto"
	// AgentOff always uses the per-command path.
	AgentOff = "off"
)

// Config is the "sandbox" object of exechost.json. The zero value is valid
// and means the defaults (see WithDefaults). The keys below are common to
// every backend; each driver owns one more key, its section ("docker":
// {…}), which it registers with its defaults and validation
// (Driver.Config), so this package names no backend and holds no backend's
// settings. Read a section with SectionOf, set one with WithSection.
type Config struct {
	// Backend is auto, none, or the name of a registered driver.
	Backend string `json:"backend,omitempty"`
	// Scope is session (default), agent or shared.
	Scope Scope `json:"scope,omitempty"`
	// IdleTimeout removes a sandbox unused for this long ("30m").
	IdleTimeout Duration `json:"idleTimeout,omitempty"`
	// Workspace is the host directory holding one workspace per agent
	// (<workspace>/<agentId>), bind-mounted at /workspace. Empty means
	// <state dir>/sandboxes.
	Workspace string `json:"workspace,omitempty"`
	// Agent is auto (default: a resident agent per sandbox forks the
	// commands) or off (a runtime exec or fresh sandbox per command).
	Agent string `json:"agent,omitempty"`
	// AgentBinary is the exechost binary run as the agent, mounted
	// read-only into the sandbox; empty means the running executable.
	// Docker needs it statically linked (CGO_ENABLED=0, as released).
	AgentBinary string `json:"agentBinary,omitempty"`

	// sections holds the drivers' own objects by key: a decoded value
	// (the section's type, defaults applied) once WithDefaults has run
	// over a registry that knows the key, else the JSON as written.
	// Config is a value type, so every change copies the map.
	sections map[string]any
}

// commonKeys are Config's own JSON keys; a driver section may not use one.
var commonKeys = []string{"backend", "scope", "idleTimeout", "workspace", "agent", "agentBinary"}

// configCommon is Config without its sections, for JSON.
type configCommon struct {
	Backend     string   `json:"backend,omitempty"`
	Scope       Scope    `json:"scope,omitempty"`
	IdleTimeout Duration `json:"idleTimeout,omitempty"`
	Workspace   string   `json:"workspace,omitempty"`
	Agent       string   `json:"agent,omitempty"`
	AgentBinary string   `json:"agentBinary,omitempty"`
}

// UnmarshalJSON reads the common keys and keeps every other key as the
// JSON of a driver's section; WithDefaults decodes the sections a
// registered driver owns, and Validate reports a key no driver owns.
func (c *Config) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	var common configCommon
	if err := json.Unmarshal(b, &common); err != nil {
		return err
	}
	*c = Config{Backend: common.Backend, Scope: common.Scope, IdleTimeout: common.IdleTimeout,
		Workspace: common.Workspace, Agent: common.Agent, AgentBinary: common.AgentBinary}
	for k, v := range raw {
		if slices.Contains(commonKeys, k) {
			continue
		}
		if c.sections == nil {
			c.sections = map[string]any{}
		}
		c.sections[k] = v
	}
	return nil
}

// MarshalJSON writes the common keys and every section.
func (c Config) MarshalJSON() ([]byte, error) {
	out := map[string]any{}
	for k, v := range c.sections {
		out[k] = v
	}
	common, err := json.Marshal(configCommon{Backend: c.Backend, Scope: c.Scope, IdleTimeout: c.IdleTimeout,
		Workspace: c.Workspace, Agent: c.Agent, AgentBinary: c.AgentBinary})
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(common, &m); err != nil {
		return nil, err
	}
	for k, v := range m {
		out[k] = v
	}
	return json.Marshal(out)
}

// Sections returns the keys of the driver sections c holds, sorted.
func (c Config) Sections() []string {
	keys := make([]string, 0, len(c.sections))
	for k := range c.sections {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// WithSection returns c with its section key set to v (a value of the
// section's type), leaving c itself unchanged.
func (c Config) WithSection(key string, v any) Config {
	m := make(map[string]any, len(c.sections)+1)
	maps.Copy(m, c.sections)
	m[key] = v
	c.sections = m
	return c
}

// SectionOf returns c's section key as T with the registered section's
// defaults applied: decoded when c holds its JSON, the defaults alone when
// c has none. A section that does not decode yields the defaults; Validate
// reports it.
func SectionOf[T any](c Config, key string) T {
	return sectionOf[T](&drivers, c, key)
}

func sectionOf[T any](r *Registry, c Config, key string) T {
	var v T
	switch s := c.sections[key].(type) {
	case T:
		v = s
	case json.RawMessage:
		_ = decodeStrict(s, &v)
	}
	if sec, ok := r.section(key); ok {
		if d, ok := sec.defaults(v).(T); ok {
			v = d
		}
	}
	return v
}

// Section is a driver's own object inside "sandbox" in exechost.json (its
// Driver.Config): the key, the Go type it decodes into, its defaults and
// its validation. Make one with NewSection.
type Section struct {
	// Key is the object's key inside "sandbox" ("docker").
	Key string
	// decode parses the JSON strictly (unknown keys are errors).
	decode func(json.RawMessage) (any, error)
	// defaults returns the value with every unset field set; a value of
	// another type comes back as the section's defaults.
	defaults func(any) any
	// validate checks the value (after defaults) against the whole
	// config; each error names the key inside the section ("memory: …").
	validate func(any, Config) []error
}

// NewSection describes a section of type T: defaults fills the unset
// fields of a T, validate reports what is wrong with one (naming keys
// relative to the section, "memory: invalid size"), given the whole
// config for checks that depend on the common keys. Either may be nil.
func NewSection[T any](key string, defaults func(*T), validate func(T, Config) []error) *Section {
	return &Section{
		Key: key,
		decode: func(raw json.RawMessage) (any, error) {
			var v T
			err := decodeStrict(raw, &v)
			return v, err
		},
		defaults: func(a any) any {
			v, _ := a.(T)
			if defaults != nil {
				defaults(&v)
			}
			return v
		},
		validate: func(a any, c Config) []error {
			v, ok := a.(T)
			if !ok {
				return []error{fmt.Errorf("holds a %T, want a %T", a, v)}
			}
			if validate == nil {
				return nil
			}
			return validate(v, c)
		},
	}
}

// decodeStrict decodes raw into v, refusing keys v does not have with the
// key's name, as exechost.json's other objects do.
func decodeStrict(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" {
				return fmt.Errorf("%s is not valid here (want %s)", te.Value, te.Type)
			}
			return fmt.Errorf("%s: %s is not valid here (want %s)", te.Field, te.Value, te.Type)
		}
		// encoding/json words it `json: unknown field "imag"`.
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			if name, err := strconv.Unquote(f); err == nil {
				return fmt.Errorf("%s: unknown key (known keys here: %s)", name, strings.Join(jsonKeys(v), ", "))
			}
		}
		return err
	}
	return nil
}

// jsonKeys lists the JSON keys of the struct v points to.
func jsonKeys(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// DefaultConfig returns the configuration used when exechost.json has no
// "sandbox" object, with every default spelled out, every registered
// driver's section included.
func DefaultConfig() Config {
	return Config{}.WithDefaults()
}

// WithDefaults returns c with every unset field set to its default, so a
// partially written "sandbox" object keeps the safe defaults for the rest;
// each registered driver's section is decoded and given its defaults.
func (c Config) WithDefaults() Config { return drivers.WithDefaults(c) }

// Validate checks c (after WithDefaults) against the registered drivers
// and names the offending key, as in `sandbox.docker.memory: invalid size
// "12q"`.
func (c Config) Validate() error { return drivers.Validate(c) }

// WithDefaults is Config.WithDefaults over the drivers of r.
func (r *Registry) WithDefaults(c Config) Config {
	if c.Backend == "" {
		c.Backend = BackendAuto
	}
	if c.Scope == "" {
		c.Scope = ScopeSession
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = Duration(DefaultIdleTimeout)
	}
	if c.Agent == "" {
		c.Agent = AgentAuto
	}
	m := make(map[string]any, len(c.sections))
	maps.Copy(m, c.sections)
	for _, d := range r.Drivers() {
		sec := d.Config
		if sec == nil {
			continue
		}
		cur, ok := m[sec.Key]
		if raw, isRaw := cur.(json.RawMessage); isRaw {
			v, err := sec.decode(raw)
			if err != nil {
				continue // kept as written, for Validate to report
			}
			cur = v
		} else if !ok {
			cur = nil
		}
		m[sec.Key] = sec.defaults(cur)
	}
	c.sections = m
	return c
}

// Validate is Config.Validate over the drivers of r.
func (r *Registry) Validate(c Config) error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("sandbox.%s: %s", key, fmt.Sprintf(format, args...)))
	}
	names := r.Names()
	switch _, known := r.Lookup(c.Backend); {
	case c.Backend == "", c.Backend == BackendAuto, c.Backend == BackendNone, known:
	default:
		errs = append(errs, fmt.Errorf("sandbox.backend: %w %q (want auto, %s or none)", ErrUnknownBackend, c.Backend, strings.Join(names, ", ")))
	}
	switch c.Scope {
	case "", ScopeSession, ScopeAgent, ScopeShared:
	default:
		bad("scope", "unknown scope %q (want session, agent or shared)", c.Scope)
	}
	if c.IdleTimeout < 0 {
		bad("idleTimeout", "must not be negative")
	}
	switch c.Agent {
	case "", AgentAuto, AgentOff:
	default:
		bad("agent", "unknown mode %q (want auto or off)", c.Agent)
	}
	if c.AgentBinary != "" && !filepath.IsAbs(c.AgentBinary) {
		bad("agentBinary", "%q is not an absolute path", c.AgentBinary)
	}
	if c.Workspace != "" && !filepath.IsAbs(c.Workspace) {
		bad("workspace", "%q is not an absolute path", c.Workspace)
	}
	for _, key := range c.Sections() {
		sec, ok := r.section(key)
		if !ok {
			bad(key, "unknown key (no sandbox driver in this binary owns it; known keys here: %s)", strings.Join(r.keys(), ", "))
			continue
		}
		v := c.sections[key]
		if raw, isRaw := v.(json.RawMessage); isRaw {
			d, err := sec.decode(raw)
			if err != nil {
				errs = append(errs, sectionError(key, err))
				continue
			}
			v = sec.defaults(d)
		}
		for _, err := range sec.validate(v, c) {
			errs = append(errs, sectionError(key, err))
		}
	}
	return errors.Join(errs...)
}

// sectionError prefixes a section's error with its place: a key inside
// the section ("memory: …") becomes sandbox.<section>.memory, anything
// else sandbox.<section>: ….
func sectionError(section string, err error) error {
	msg := err.Error()
	if k, _, ok := strings.Cut(msg, ": "); ok && k != "" && !strings.ContainsAny(k, " \t\"") {
		return fmt.Errorf("sandbox.%s.%w", section, err)
	}
	return fmt.Errorf("sandbox.%s: %w", section, err)
}

// section returns the registered section of key.
func (r *Registry) section(key string) (*Section, bool) {
	for _, d := range r.Drivers() {
		if d.Config != nil && d.Config.Key == key {
			return d.Config, true
		}
	}
	return nil, false
}

// keys lists every key Config accepts with r's drivers.
func (r *Registry) keys() []string {
	out := slices.Clone(commonKeys)
	for _, d := range r.Drivers() {
		if d.Config != nil {
			out = append(out, d.Config.Key)
		}
	}
	return out
}

// Duration is a time.Duration written as a Go duration string ("30m") in
// JSON, which is what a human edits.
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON accepts a duration string ("90s", "30m").
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"30m\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}

// ParseSize parses a byte size as docker does: a number with an optional
// b, k, m or g suffix (powers of 1024), e.g. "512m". "0" means no limit.
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return 0, fmt.Errorf("invalid size %q: empty", s)
	}
	mult := int64(1)
	switch t[len(t)-1] {
	case 'b':
		t = t[:len(t)-1]
	case 'k':
		mult, t = 1<<10, t[:len(t)-1]
	case 'm':
		mult, t = 1<<20, t[:len(t)-1]
	case 'g':
		mult, t = 1<<30, t[:len(t)-1]
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid size %q (want a number with an optional k, m or g suffix)", s)
	}
	if n > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return n * mult, nil
}

// KeyError is an error of a section's validation about one key, worded as
// the section's errors are ("memory: invalid size …"); the registry puts
// sandbox.<section>. before it.
func KeyError(key, format string, args ...any) error {
	return fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...))
}

// CheckSize reports a size value (ParseSize) that does not parse, as a
// section's validation error for key; empty is fine.
func CheckSize(key, v string) []error {
	if v == "" {
		return nil
	}
	if _, err := ParseSize(v); err != nil {
		return []error{KeyError(key, "%v", err)}
	}
	return nil
}
