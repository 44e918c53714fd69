package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Backend names accepted in sandbox.backend.
const (
	// BackendAuto picks docker when a daemon answers, else the daemonless
	// backend when it works on this kernel, else no sandbox at all.
	BackendAuto = "auto"
	// BackendDocker runs commands in a Docker container per scope.
	BackendDocker = "docker"
	// BackendBwrap runs each command in fresh namespaces via bubblewrap.
	BackendBwrap = "bwrap"
	// BackendKubernetes runs commands in a pod per scope on a Kubernetes
	// cluster; never chosen by auto.
	BackendKubernetes = "kubernetes"
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

// Landlock modes for the daemonless backend (sandbox.bwrap.landlock).
const (
	// LandlockAuto applies Landlock when the kernel supports it and reports
	// when it does not.
	LandlockAuto = "auto"
	// LandlockRequire refuses to run commands when Landlock is missing.
	LandlockRequire = "require"
	// LandlockOff never applies Landlock.
	LandlockOff = "off"
)

// Config is the "sandbox" object of exechost.json. The zero value is valid
// and means the defaults (see WithDefaults).
type Config struct {
	// Backend is auto, docker, bwrap or none.
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
	// Docker configures the docker backend.
	Docker DockerConfig `json:"docker"`
	// Bwrap configures the daemonless backend.
	Bwrap BwrapConfig `json:"bwrap"`
	// Kubernetes configures the Kubernetes backend.
	Kubernetes KubernetesConfig `json:"kubernetes"`
}

// KubernetesConfig is sandbox.kubernetes. Like the other sections, every
// field has a safe default except the agent image, which only the user
// can name.
type KubernetesConfig struct {
	// Kubeconfig is the kubeconfig file; empty means in-cluster
	// credentials when the gateway runs in a pod, else $KUBECONFIG or
	// ~/.kube/config.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Context is the kubeconfig context; empty means its current one.
	Context string `json:"context,omitempty"`
	// Namespace holds the sandbox pods (default "exechost"); it must
	// exist, and the gateway needs the Role in docs/sandbox.md there.
	Namespace string `json:"namespace,omitempty"`
	// Image is the pods' image; it must contain /bin/sh.
	Image string `json:"image,omitempty"`
	// AgentImage is an image holding the static exechost binary at
	// /exechost; an init container copies it into the pod. Required.
	AgentImage string `json:"agentImage,omitempty"`
	// PullPolicy is the pods' imagePullPolicy (default IfNotPresent).
	PullPolicy string `json:"pullPolicy,omitempty"`
	// RunAsUser is the uid (and gid) the pod runs as (default 65534);
	// root (0) is refused.
	RunAsUser int64 `json:"runAsUser,omitempty"`
	// Memory limit ("512m").
	Memory string `json:"memory,omitempty"`
	// CPUs limit (fractional CPUs).
	CPUs float64 `json:"cpus,omitempty"`
	// TmpfsSize is the size of the memory-backed /tmp and /workspace.
	TmpfsSize string `json:"tmpfsSize,omitempty"`
	// PoolSize is how many ready pods are kept for scopes not seen yet
	// (default 0: a pod is created on a scope's first command).
	PoolSize int `json:"poolSize,omitempty"`
	// AllowEgress lets pods open network connections; by default a
	// NetworkPolicy denies all egress (and ingress).
	AllowEgress bool `json:"allowEgress,omitempty"`
}

// DockerConfig is sandbox.docker. Every field has a safe default, so users
// only loosen what they need.
type DockerConfig struct {
	// Host is the Engine API address (unix:///var/run/docker.sock); empty
	// means $DOCKER_HOST or the platform default.
	Host string `json:"host,omitempty"`
	// Image is the container image; it must contain /bin/sh.
	Image string `json:"image,omitempty"`
	// Network is the container network mode; "none" by default.
	Network string `json:"network,omitempty"`
	// User is "uid:gid" (or a name the image knows) the commands run as.
	User string `json:"user,omitempty"`
	// ReadOnlyRoot mounts the image's filesystem read-only (default true).
	ReadOnlyRoot *bool `json:"readOnlyRoot,omitempty"`
	// Memory limit ("512m", "1g", bytes); "0" disables.
	Memory string `json:"memory,omitempty"`
	// CPUs limit (fractional CPUs); negative disables.
	CPUs float64 `json:"cpus,omitempty"`
	// PidsLimit caps processes in the container; negative disables.
	PidsLimit int64 `json:"pidsLimit,omitempty"`
	// TmpfsSize is the size of the tmpfs mounted at /tmp.
	TmpfsSize string `json:"tmpfsSize,omitempty"`
}

// BwrapConfig is sandbox.bwrap, the daemonless backend.
type BwrapConfig struct {
	// Path of the bwrap binary; empty means "bwrap" on PATH.
	Path string `json:"path,omitempty"`
	// Landlock is auto (default), require or off.
	Landlock string `json:"landlock,omitempty"`
	// PidsLimit caps processes in one sandbox; negative disables.
	PidsLimit int64 `json:"pidsLimit,omitempty"`
	// Memory caps each process's address space (RLIMIT_AS, "2g"); empty
	// or "0" disables. It is coarse (it counts reservations, not use), so
	// it is off by default.
	Memory string `json:"memory,omitempty"`
	// TmpfsSize is the size of the tmpfs mounted at /tmp.
	TmpfsSize string `json:"tmpfsSize,omitempty"`
	// ROBind lists extra host paths made visible read-only (the default
	// view is the system directories only: /usr, /bin, /lib*, /etc, …).
	ROBind []string `json:"roBind,omitempty"`
}

// DefaultConfig returns the configuration used when exechost.json has no
// "sandbox" object, with every default spelled out.
func DefaultConfig() Config {
	return Config{}.WithDefaults()
}

// WithDefaults returns c with every unset field set to its default, so a
// partially written "sandbox" object keeps the safe defaults for the rest.
func (c Config) WithDefaults() Config {
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
	d := &c.Docker
	if d.Image == "" {
		d.Image = DefaultImage
	}
	if d.Network == "" {
		d.Network = "none"
	}
	if d.User == "" {
		d.User = DefaultUser
	}
	if d.ReadOnlyRoot == nil {
		t := true
		d.ReadOnlyRoot = &t
	}
	if d.Memory == "" {
		d.Memory = DefaultMemory
	}
	if d.CPUs == 0 {
		d.CPUs = DefaultCPUs
	}
	if d.PidsLimit == 0 {
		d.PidsLimit = DefaultPidsLimit
	}
	if d.TmpfsSize == "" {
		d.TmpfsSize = DefaultTmpfsSize
	}
	b := &c.Bwrap
	if b.Landlock == "" {
		b.Landlock = LandlockAuto
	}
	if b.PidsLimit == 0 {
		b.PidsLimit = DefaultPidsLimit
	}
	if b.TmpfsSize == "" {
		b.TmpfsSize = DefaultTmpfsSize
	}
	k := &c.Kubernetes
	if k.Namespace == "" {
		k.Namespace = "exechost"
	}
	if k.Image == "" {
		k.Image = DefaultImage
	}
	if k.PullPolicy == "" {
		k.PullPolicy = "IfNotPresent"
	}
	if k.RunAsUser == 0 {
		k.RunAsUser = 65534
	}
	if k.Memory == "" {
		k.Memory = DefaultMemory
	}
	if k.CPUs == 0 {
		k.CPUs = DefaultCPUs
	}
	if k.TmpfsSize == "" {
		k.TmpfsSize = DefaultTmpfsSize
	}
	return c
}

// Validate checks c (after WithDefaults) and names the offending key, as in
// `sandbox.docker.memory: invalid size "12q"`.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("sandbox.%s: %s", key, fmt.Sprintf(format, args...)))
	}
	switch c.Backend {
	case "", BackendAuto, BackendDocker, BackendBwrap, BackendKubernetes, BackendNone:
	default:
		bad("backend", "unknown backend %q (want auto, docker, bwrap, kubernetes or none)", c.Backend)
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
	d := c.Docker
	if strings.ContainsAny(d.User, " \t\n") {
		bad("docker.user", "%q contains whitespace", d.User)
	}
	b := c.Bwrap
	switch b.Landlock {
	case "", LandlockAuto, LandlockRequire, LandlockOff:
	default:
		bad("bwrap.landlock", "unknown mode %q (want auto, require or off)", b.Landlock)
	}
	for i, p := range b.ROBind {
		if !filepath.IsAbs(p) {
			bad(fmt.Sprintf("bwrap.roBind[%d]", i), "%q is not an absolute path", p)
		}
	}
	k := c.Kubernetes
	switch k.PullPolicy {
	case "", "Always", "IfNotPresent", "Never":
	default:
		bad("kubernetes.pullPolicy", "unknown policy %q (want Always, IfNotPresent or Never)", k.PullPolicy)
	}
	if k.RunAsUser < 0 {
		bad("kubernetes.runAsUser", "must be a non-root uid, not %d", k.RunAsUser)
	}
	for _, sz := range []struct{ key, v string }{
		{"docker.memory", d.Memory}, {"docker.tmpfsSize", d.TmpfsSize},
		{"bwrap.memory", b.Memory}, {"bwrap.tmpfsSize", b.TmpfsSize},
		{"kubernetes.memory", k.Memory}, {"kubernetes.tmpfsSize", k.TmpfsSize},
	} {
		if sz.v == "" {
			continue
		}
		if _, err := ParseSize(sz.v); err != nil {
			bad(sz.key, "%v", err)
		}
	}
	if k.CPUs < 0 {
		bad("kubernetes.cpus", "must not be negative")
	}
	if k.PoolSize < 0 || k.PoolSize > 100 {
		bad("kubernetes.poolSize", "%d is out of range (0 to 100)", k.PoolSize)
	}
	if c.Backend == BackendKubernetes && k.AgentImage == "" {
		bad("kubernetes.agentImage", "required with sandbox.backend \"kubernetes\" (hint: an image with the static exechost binary at /exechost; see docs/sandbox.md)")
	}
	if k.Kubeconfig != "" && !filepath.IsAbs(k.Kubeconfig) {
		bad("kubernetes.kubeconfig", "%q is not an absolute path", k.Kubeconfig)
	}
	return errors.Join(errs...)
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
