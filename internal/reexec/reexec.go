// Package reexec is the one registry of the binary's re-exec entry points:
// the roles the exechost binary (or a test binary) plays when a daemon
// starts it again with a flag no user types, such as the reaper
// (--exechost-reaper=v2), the interpreter (--exechost-interp=v1) or the
// confining launcher (--exechost-confine=v1).
//
// A package registers its entry point from init with Register
// (registration only, no work); main calls Init first, before anything
// else, and Init runs the entry point os.Args[1] names. RegisterEarly is
// the exception: its entry runs from the registering package's own init
// when os.Args[1] names it, before main and Init (the reaper, the
// confining launcher, the interpreter). A test binary whose code re-executes
// itself (os.Executable is the test binary there) calls Init first in its
// TestMain. The design follows moby's pkg/reexec, dispatching on the first
// argument rather than on argv[0].
//
// It imports only the standard library's os and slices, so that the
// reaper, which imports it, keeps the footprint of a leaf (see
// RegisterEarly).
package reexec

import (
	"os"
	"slices"
)

// Prefix starts every entry point's name: a flag of the exechost
// namespace, so a user's command line (a subcommand, a path) never
// dispatches to one.
const Prefix = "--exechost-"

// Registry maps entry point names to their functions. The binary has one
// (the package-level functions); tests build their own.
type Registry struct {
	entries map[string]entry
}

// entry is one registered entry point.
type entry struct {
	run   func()
	early bool
}

// std is the binary's registry, filled by package inits.
var std Registry

// Register adds the entry point name to the binary's registry; it panics
// if name is already registered or does not start with Prefix. Call it
// from init: it does no work, and the entry runs only from Init.
func Register(name string, run func()) { std.Register(name, run) }

// RegisterEarly is Register for an entry point that must run before the
// inits of the binary's heavier packages: if os.Args[1] is name, it runs
// run at once, from the registering package's init, and run must not
// return (it ends the process). Go initialises a package as soon as every
// package it imports is (and, among those ready, in the order of their
// import paths), so a package importing little (the reaper: os,
// os/signal, syscall and this package) runs before most of the binary's
// package inits and stays at a Go program's floor of memory. The
// launcher, the interpreter and the jail server use it too: their
// packages import none of the Kubernetes driver, the OpenTelemetry SDK or
// the CLI, whose inits they then never pay. Some packages whose paths
// sort early (before kernel.org and mvdan.cc) may still initialise first. A package that
// imports any heavy package gains nothing from it and uses Register.
func RegisterEarly(name string, run func()) {
	std.RegisterEarly(name, run)
	if len(os.Args) >= 2 && os.Args[1] == name {
		run()
		os.Exit(0) // run must not return; if it does, nothing else runs
	}
}

// Init runs the entry point os.Args[1] names, if one is registered, and
// reports whether it did; main calls it first and returns when it is
// true. An entry point normally ends the process itself with its status.
func Init() bool { return std.Dispatch(os.Args) }

// Names lists the binary's registered entry points, sorted.
func Names() []string { return std.Names() }

// Args returns the arguments that follow the running entry point's name,
// exiting with status 2 and a usage message when there are fewer than min
// or, unless max is negative, more than max. usage names them
// ("PLAN", "CONFINEMENT PROGRAM [ARG...]").
func Args(min, max int, usage string) []string {
	if len(os.Args) < 2 {
		os.Stderr.WriteString("exechost: reexec.Args called outside an entry point\n")
		os.Exit(2)
	}
	args := os.Args[2:]
	if len(args) < min || (max >= 0 && len(args) > max) {
		os.Stderr.WriteString("exechost: usage: exechost " + os.Args[1] + " " + usage + " (an internal entry point: the daemon starts it)\n")
		os.Exit(2)
	}
	return args
}

// Register adds the entry point name to r; it panics if name is already
// registered or does not start with Prefix.
func (r *Registry) Register(name string, run func()) { r.add(name, entry{run: run}) }

// RegisterEarly adds an early entry point (see the package-level
// RegisterEarly) to r; it dispatches like any other from Dispatch.
func (r *Registry) RegisterEarly(name string, run func()) { r.add(name, entry{run: run, early: true}) }

func (r *Registry) add(name string, e entry) {
	if len(name) <= len(Prefix) || name[:len(Prefix)] != Prefix {
		panic("reexec: entry point " + quote(name) + " does not start with " + Prefix)
	}
	if e.run == nil {
		panic("reexec: entry point " + quote(name) + " has no function")
	}
	if _, dup := r.entries[name]; dup {
		panic("reexec: entry point " + quote(name) + " registered twice")
	}
	if r.entries == nil {
		r.entries = map[string]entry{}
	}
	r.entries[name] = e
}

// Dispatch runs the entry point args[1] names (args is a whole argv, the
// program's name first) and reports whether one was registered.
func (r *Registry) Dispatch(args []string) bool {
	if len(args) < 2 {
		return false
	}
	e, ok := r.entries[args[1]]
	if !ok {
		return false
	}
	e.run()
	return true
}

// Names lists r's entry points, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.entries))
	for n := range r.entries {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Early reports whether name was registered with RegisterEarly.
func (r *Registry) Early(name string) bool { return r.entries[name].early }

// quote is strconv.Quote's simple case, without importing strconv.
func quote(s string) string { return `"` + s + `"` }
