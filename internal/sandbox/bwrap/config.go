package bwrap

import (
	"fmt"
	"path/filepath"

	"github.com/exechost/exechost/internal/sandbox"
)

// Name is the driver's name, the value of sandbox.backend that selects it.
const Name = "bwrap"

// Landlock modes (sandbox.bwrap.landlock).
const (
	// LandlockAuto applies Landlock when the kernel supports it and reports
	// when it does not.
	LandlockAuto = "auto"
	// LandlockRequire refuses to run commands when Landlock is missing.
	LandlockRequire = "require"
	// LandlockOff never applies Landlock.
	LandlockOff = "off"
)

// Config is sandbox.bwrap, this driver's own section of exechost.json.
type Config struct {
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

// section registers Config with its defaults and validation.
var section = sandbox.NewSection("bwrap", defaults, validate)

func defaults(b *Config) {
	if b.Landlock == "" {
		b.Landlock = LandlockAuto
	}
	if b.PidsLimit == 0 {
		b.PidsLimit = sandbox.DefaultPidsLimit
	}
	if b.TmpfsSize == "" {
		b.TmpfsSize = sandbox.DefaultTmpfsSize
	}
}

func validate(b Config, _ sandbox.Config) []error {
	var errs []error
	switch b.Landlock {
	case "", LandlockAuto, LandlockRequire, LandlockOff:
	default:
		errs = append(errs, sandbox.KeyError("landlock", "unknown mode %q (want auto, require or off)", b.Landlock))
	}
	for i, p := range b.ROBind {
		if !filepath.IsAbs(p) {
			errs = append(errs, sandbox.KeyError(fmt.Sprintf("roBind[%d]", i), "%q is not an absolute path", p))
		}
	}
	errs = append(errs, sandbox.CheckSize("memory", b.Memory)...)
	errs = append(errs, sandbox.CheckSize("tmpfsSize", b.TmpfsSize)...)
	return errs
}

// ConfigOf returns cfg's sandbox.bwrap with its defaults.
func ConfigOf(cfg sandbox.Config) Config { return sandbox.SectionOf[Config](cfg, section.Key) }

// With returns cfg with sandbox.bwrap changed by edit.
func With(cfg sandbox.Config, edit func(*Config)) sandbox.Config {
	b := ConfigOf(cfg)
	edit(&b)
	return cfg.WithSection(section.Key, b)
}
