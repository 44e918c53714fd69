package shellcmd

import (
	"maps"
	"path"
	"slices"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// Env is the execution host's view that resolution depends on. It always
// describes the host that will run the command, never values taken from the
// request, so a request cannot steer resolution with its own PATH.
type Env struct {
	// Cwd is the absolute directory the command starts in. When empty,
	// relative path-qualified names do not resolve.
	Cwd string
	// PATH is the host's search path for bare names (colon-separated).
	PATH string
	// Home is the host user's home directory, for ~ in command names.
	Home string
	// Contained, when it says the jail holds, applies the contained rules
	// (Contained); nil: the strict rules.
	Contained *Contained
}

// Role says what kind of program a segment runs, so callers can refuse to
// record programs whose allowlisting would allow far more than was shown.
type Role string

// The roles of a segment.
const (
	// RoleCommand is an ordinary program.
	RoleCommand Role = "command"
	// RoleShell is a shell whose script (a file, standard input, or a
	// payload this package does not parse) is not analysed.
	RoleShell Role = "shell"
	// RoleInterpreter is a language interpreter: it runs whatever code its
	// arguments or input carry.
	RoleInterpreter Role = "interpreter"
	// RolePrivilege is a privilege changer (sudo, doas, …); the command it
	// runs is a separate segment.
	RolePrivilege Role = "privilege"
	// RoleWrapper is a wrapper whose own program runs (xargs, stdbuf, a
	// path-qualified env, …); the command it runs is a separate segment.
	RoleWrapper Role = "wrapper"
)

// Segment is one executable the command would run. Every segment must match
// the allowlist for the command to be allowed.
type Segment struct {
	// Argv holds the words as executed, after looking through wrappers.
	// Words that expand at run time are shown as written, and a final "…"
	// stands for arguments xargs supplies at run time.
	Argv []string `json:"argv"`
	// Dynamic marks, per Argv word, a value known only at run time (an
	// expansion, a glob, xargs's "…"): an argument rule never vouches for
	// such a word, and the run-time guard checks what it became.
	Dynamic []bool `json:"-"`
	// Name is the command name as written, with quotes removed.
	Name string `json:"name"`
	// ResolvedPath is the absolute, cleaned (not symlink-resolved) path of
	// the executable, or "" when the name did not resolve (a miss).
	ResolvedPath string `json:"resolvedPath"`
	// RealPath is ResolvedPath with symlinks resolved.
	RealPath string `json:"realPath,omitempty"`
	// Role is what kind of program this is.
	Role Role `json:"role"`
	// Via lists the wrappers, privilege changers and shells looked through
	// to reach this segment, outermost first.
	Via []string `json:"via,omitempty"`
	// Applied lists the wrappers the runner applies around this command
	// itself (env, nice, nohup, timeout, time): no program of theirs runs.
	Applied []string `json:"applied,omitempty"`
	// StartedBy is the program that starts this command (xargs, sudo, a
	// shell binary) when the interpreter does not start it itself; run-time
	// enforcement cannot see such a start, only the analysis vouches for it.
	StartedBy string `json:"startedBy,omitempty"`
	// Runs says how the command will run, for people: "exec /usr/bin/git",
	// with the wrappers the runner applies, or the program that starts it.
	Runs string `json:"runs"`
	// File is the file ResolvedPath named when the analysis found it
	// executable (following symlinks, as execve does): the file an
	// execution host pins for the run. Zero when unresolved, or where the
	// platform has no file ids. Not part of any output.
	File FileID `json:"-"`
}

// FileID names one file by device and inode.
type FileID struct {
	Dev, Ino uint64
}

// IsZero reports whether id names no file.
func (id FileID) IsZero() bool { return id == FileID{} }

// add appends a segment reached in ctx.
func (a *analyzer) add(seg Segment, ctx cmdCtx) {
	seg.Applied = ctx.applied
	if !ctx.interp {
		seg.StartedBy = ctx.by
		if seg.StartedBy == "" {
			seg.StartedBy = lastVia(ctx)
		}
	}
	p := seg.ResolvedPath
	if p == "" {
		p = seg.Name + " (not found)"
	}
	switch {
	case seg.StartedBy != "":
		seg.Runs = "exec " + p + " started by " + seg.StartedBy
	case len(seg.Applied) > 0:
		seg.Runs = "exec " + p + " (" + strings.Join(seg.Applied, ", ") + " applied by the runner)"
	default:
		seg.Runs = "exec " + p
	}
	if a.segs == nil {
		a.segs = make([]Segment, 0, 4) // a pipeline's worth, grown once at most
	}
	a.segs = append(a.segs, seg)
}

// Analysis is the result of analysing one command.
type Analysis struct {
	// OK is true when every executed command could be determined
	// statically. When false the command is a miss, never an allow.
	OK bool `json:"analysisOk"`
	// Error says what made the analysis fail, short and actionable.
	Error string `json:"error,omitempty"`
	// Failure is Error in parts (the construct, its position, the hint),
	// for a caller that needs one of them; nil when OK.
	Failure *Failure `json:"-"`
	// Segments are the executables that must match the allowlist. When OK is
	// false they may be partial, and serve only for display.
	Segments []Segment `json:"segments"`
	// Canonical is the command printed from its parse tree: what the
	// interpreter runs and what a human approves. Empty when the text does
	// not parse (then it can only run as shell text, never by allowlist).
	Canonical string `json:"canonical,omitempty"`
	// Hash is the sha256 of Canonical, which an approval binds.
	Hash string `json:"canonicalSha256,omitempty"`
	// Builtins lists the builtins the interpreter runs itself and where;
	// they need no allowlist entry.
	Builtins []Builtin `json:"builtins,omitempty"`
	// Env lists, sorted, the variables the command itself puts in the
	// environment of the programs it runs (prefix assignments, export,
	// env NAME=VALUE, sudo NAME=VALUE, and every assignment under set -a).
	// Each must be one the policy permits (policy.EnvPermitted); the
	// request's own env is checked beside it by the execution host.
	Env []string `json:"env,omitempty"`
	// Contained lists the constructs accepted only because the walls
	// hold (Env.Contained): empty when the strict rules alone allowed the
	// text. The run must then go to the guarded interpreter, confined.
	Contained []string `json:"contained,omitempty"`
}

// Interpretable reports whether the interpreter can run the command: it
// parsed, and its canonical form is stable.
func (a Analysis) Interpretable() bool { return a.Canonical != "" }

// Executables returns the resolved paths the interpreter itself may start
// for this analysis: run-time enforcement refuses any other. Commands that
// another program starts (xargs, sudo) are not in it, since the interpreter
// never starts them.
func (a Analysis) Executables() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range a.Segments {
		if s.StartedBy == "" && s.ResolvedPath != "" && !seen[s.ResolvedPath] {
			seen[s.ResolvedPath] = true
			out = append(out, s.ResolvedPath)
		}
	}
	return out
}

// Paths returns the ResolvedPath of each segment, in order, ready for
// policy.MatchAll. Unresolved segments contribute "" so that they miss.
func (a Analysis) Paths() []string {
	out := make([]string, len(a.Segments))
	for i, s := range a.Segments {
		out[i] = s.ResolvedPath
	}
	return out
}

// maxDepth bounds recursion through shell payloads and wrappers, so a
// hostile command cannot make the analysis unbounded.
const maxDepth = 16

// maxTextLen bounds the command text analysed, payloads included. The
// parser and the analysis recurse on nesting, and a Go stack overflow is
// fatal (recover cannot catch it), so hostile text must stay small.
const maxTextLen = 64 << 10

// maxNesting bounds how deeply parentheses and braces nest, for the same
// reason; it counts quoted ones too, which only makes it stricter.
const maxNesting = 256

// nesting returns the deepest nesting of ( and { in src.
func nesting(src string) int {
	depth, deepest := 0, 0
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case '(', '{':
			depth++
			deepest = max(deepest, depth)
		case ')', '}':
			depth = max(depth-1, 0)
		}
	}
	return deepest
}

// parseFailure is the analysis's error for text the parser rejects.
func parseFailure(err error) error {
	return failf("parse error: %v", err).hint("bash-only syntax cannot be analysed; it can only run as shell text after a human approves it")
}

// analyze is Analyze without the memo, recording the file-system reads
// of a successful analysis into facts (when not nil).
func (z *Analyzer) analyze(text string, env Env, facts *factLog) (out Analysis) {
	a := analyzers.Get().(*analyzer)
	*a = analyzer{z: z, env: env, look: z.polled}
	defer analyzers.Put(a) // after recover: nothing of a outlives the analysis
	defer a.recover(&out)
	err := a.text(text, a.initialCwd(), cmdCtx{interp: true}, false, true)
	if facts != nil && err == nil {
		a.reads.export(facts) // only a successful analysis is remembered
	}
	return a.result(err)
}

// AnalyzeArgv analyses a system.run argv: it is run as one simple command
// of literal words (QuoteArgv), by the same interpreter as command text, so
// wrappers the runner applies and builtins mean the same in both.
func (z *Analyzer) AnalyzeArgv(argv []string, env Env) (out Analysis) {
	if len(argv) == 0 {
		return Analysis{Error: "empty argv", Failure: failf("empty argv"), Segments: []Segment{}}
	}
	text, err := QuoteArgv(argv)
	if err != nil {
		return Analysis{Error: err.Error(), Failure: failureOf(err), Segments: []Segment{}}
	}
	return z.Analyze(text, env)
}

type analyzer struct {
	z         *Analyzer // its caches
	env       Env
	segs      []Segment
	canonical string
	builtins  []Builtin
	// reads are its file-system reads: remembered for the analysis, and
	// recorded for the memo (memo.go).
	reads readLog
	// look is the analysis's one poll of the fact cache's watches
	// (factcache.go).
	look lazyView
	// env holds the variables the command puts in a program's
	// environment; plain holds variables assigned without export, which
	// set -a (allexport) exports too.
	envNames, plain map[string]bool
	allexport       bool
	// substs are the command substitutions the walker analysed, and
	// accepted the constructs it accepted under the contained rules.
	substs   map[*syntax.CmdSubst]bool
	accepted []string
}

// noteEnv records that the command gives its programs the variable name.
func (a *analyzer) noteEnv(name string) {
	if a.envNames == nil {
		a.envNames = map[string]bool{}
	}
	a.envNames[name] = true
}

// plainAssign records a plain assignment, exported only under set -a.
func (a *analyzer) plainAssign(name string) {
	if a.plain == nil {
		a.plain = map[string]bool{}
	}
	a.plain[name] = true
}

// analyzers hold analyzers for reuse: one is over a kilobyte (its reads'
// array), and analyze hands out only what it built afresh (segments,
// builtins, names), so a reset one starts as a new one.
var analyzers = sync.Pool{New: func() any { return new(analyzer) }}

func newAnalyzer(z *Analyzer, env Env) *analyzer {
	return &analyzer{z: z, env: env, look: z.polled}
}

func (a *analyzer) initialCwd() cwdState {
	if a.env.Cwd == "" || !strings.HasPrefix(a.env.Cwd, "/") {
		return cwdState{}
	}
	return cwdState{dir: path.Clean(a.env.Cwd)}
}

// recover turns a panic (a parser bug, say) into a failed analysis: a
// security check that crashes must still fail closed, and must not take
// the execution host down with it.
func (a *analyzer) recover(out *Analysis) {
	if r := recover(); r != nil {
		*out = a.result(failf("internal error analysing the command: %v", r))
	}
}

func (a *analyzer) result(err error) Analysis {
	out := Analysis{OK: err == nil, Segments: a.segs, Canonical: a.canonical, Builtins: a.builtins, Contained: a.accepted}
	if a.allexport {
		for n := range a.plain {
			a.noteEnv(n)
		}
	}
	if len(a.envNames) > 0 {
		out.Env = slices.Sorted(maps.Keys(a.envNames))
	}
	if out.Canonical != "" {
		out.Hash = Hash(out.Canonical)
	}
	if out.Segments == nil {
		out.Segments = []Segment{}
	}
	if err != nil {
		out.Failure = failureOf(err)
		out.Error = out.Failure.Error()
		out.Contained = nil // only an analysis that vouches says what it accepted
	}
	return out
}

// text parses and analyses shell text. base says how the shell running it
// was reached (wrappers and shells looked through, nesting depth, whether
// the interpreter runs it); positional is true for a shell -c payload that
// has arguments after it. top is true for the request's own text, which the
// interpreter runs in its canonical form: the analysis walks the parse of
// that form. A payload is parsed as written, exactly as the interpreter
// parses it when it runs the payload.
func (a *analyzer) text(src string, cwd cwdState, base cmdCtx, positional, top bool) error {
	if base.depth > maxDepth {
		return failf("too many nested shells and wrappers (more than %d)", maxDepth)
	}
	if len(src) > maxTextLen {
		return failf("command text longer than %d bytes", maxTextLen)
	}
	if nesting(src) > maxNesting {
		return failf("command text nests parentheses or braces more than %d deep", maxNesting)
	}
	if strings.ContainsRune(src, 0) {
		return failf("command text contains a NUL byte")
	}
	if strings.ContainsRune(src, '\r') {
		// The parser takes a backslash before CR LF for a line continuation;
		// sh sees an escaped CR, then runs the next line as a new command.
		return failf("command text contains a carriage return").hint("use \\n line endings")
	}
	// The contained rules hold only for text the interpreter runs itself.
	contained := a.env.Contained.on() && base.interp
	var f *syntax.File
	if top {
		p, err := a.z.parseTop(src, positional, contained)
		if p != nil {
			a.canonical = p.canonical
		}
		if err != nil {
			return err
		}
		f = p.canon
	} else {
		raw, err := Parse(src)
		if err != nil {
			return parseFailure(err)
		}
		if err := validate(raw, src, positional, contained); err != nil {
			return err
		}
		f = raw
	}
	base.shell, base.tailOpen, base.pos = true, false, syntax.Pos{}
	w := &walker{a: a, base: base}
	if contained && a.substs == nil {
		a.substs = map[*syntax.CmdSubst]bool{}
	}
	if _, _, err := w.list(f.Stmts, cwd); err != nil {
		return err
	}
	if cs := a.unanalysedSubst(f); contained && cs != nil {
		return failf("command substitution $(…)").at(cs.Pos(), " where the analysis cannot follow it").hint("use $(…) only in arguments")
	}
	return nil
}
