package config

// The sandbox drivers own their sections of "sandbox" (sandbox.Driver.
// Config): link them, as the exechost binary does, so that Parse knows
// sandbox.docker, sandbox.bwrap and sandbox.kubernetes.
import _ "github.com/exechost/exechost/internal/sandbox/pick"
