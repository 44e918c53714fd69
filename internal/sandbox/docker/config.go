package docker

import (
	"strings"

	"github.com/exechost/exechost/internal/sandbox"
)

// Name is the driver's name, the value of sandbox.backend that selects it.
const Name = "docker"

// Config is sandbox.docker, this driver's own section of exechost.json.
// Every field has a safe default, so users only loosen what they need.
type Config struct {
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

// section registers Config with its defaults and validation.
var section = sandbox.NewSection("docker", defaults, validate)

func defaults(d *Config) {
	if d.Image == "" {
		d.Image = sandbox.DefaultImage
	}
	if d.Network == "" {
		d.Network = "none"
	}
	if d.User == "" {
		d.User = sandbox.DefaultUser
	}
	if d.ReadOnlyRoot == nil {
		t := true
		d.ReadOnlyRoot = &t
	}
	if d.Memory == "" {
		d.Memory = sandbox.DefaultMemory
	}
	if d.CPUs == 0 {
		d.CPUs = sandbox.DefaultCPUs
	}
	if d.PidsLimit == 0 {
		d.PidsLimit = sandbox.DefaultPidsLimit
	}
	if d.TmpfsSize == "" {
		d.TmpfsSize = sandbox.DefaultTmpfsSize
	}
}

func validate(d Config, _ sandbox.Config) []error {
	var errs []error
	if strings.ContainsAny(d.User, " \t\n") {
		errs = append(errs, sandbox.KeyError("user", "%q contains whitespace", d.User))
	}
	errs = append(errs, sandbox.CheckSize("memory", d.Memory)...)
	errs = append(errs, sandbox.CheckSize("tmpfsSize", d.TmpfsSize)...)
	return errs
}

// ConfigOf returns cfg's sandbox.docker with its defaults.
func ConfigOf(cfg sandbox.Config) Config { return sandbox.SectionOf[Config](cfg, section.Key) }

// With returns cfg with sandbox.docker changed by edit.
func With(cfg sandbox.Config, edit func(*Config)) sandbox.Config {
	d := ConfigOf(cfg)
	edit(&d)
	return cfg.WithSection(section.Key, d)
}
