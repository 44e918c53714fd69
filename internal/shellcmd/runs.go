package shellcmd

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// This file holds what the analysis and the interpreter that runs an
// analysed tree (package shellrun) must agree on, each decided once: how
// text is parsed, which builtins run inside the interpreter, which wrappers
// the runner applies itself, and which shell invocations are interpreted
// rather than started.

// Parse parses command text exactly as the analysis and the interpreter
// both read it: mvdan.cc/sh in its POSIX variant. Every reader of command
// text that decides what runs goes through here.
func Parse(src string) (*syntax.File, error) {
	p := parsers.Get().(*syntax.Parser)
	f, err := p.Parse(strings.NewReader(src), "")
	parsers.Put(p)
	if err != nil {
		return nil, err
	}
	if mayDeclare(src) {
		declarations(f)
	}
	return f, nil
}

// mayDeclare reports whether src can hold a simple command named export or
// readonly: their letters in a row, or a backslash, since a line
// continuation inside a word joins its halves ("exp\<newline>ort"). Any
// other text has none for declarations to find, and skips its walk.
func mayDeclare(src string) bool {
	return strings.Contains(src, "export") || strings.Contains(src, "readonly") || strings.IndexByte(src, '\\') >= 0
}

// declarations turns simple commands named export or readonly into the
// declaration clauses the interpreter implements (the POSIX parse leaves
// them as plain calls, which the interpreter cannot run). Each word stays a
// word, split at its first "=" at run time as export does; the tree prints
// to the same text.
func declarations(f *syntax.File) {
	syntax.Walk(f, func(n syntax.Node) bool {
		st, ok := n.(*syntax.Stmt)
		if !ok {
			return true
		}
		ce, ok := st.Cmd.(*syntax.CallExpr)
		if !ok || len(ce.Assigns) > 0 || len(ce.Args) == 0 {
			return true
		}
		name := ce.Args[0]
		if lit := name.Lit(); (lit == "export" || lit == "readonly") && len(name.Parts) == 1 {
			dc := &syntax.DeclClause{Variant: &syntax.Lit{ValuePos: name.Pos(), ValueEnd: name.End(), Value: lit}}
			for _, w := range ce.Args[1:] {
				dc.Args = append(dc.Args, &syntax.Assign{Naked: true, Value: w})
			}
			st.Cmd = dc
		}
		return true
	})
}

// Print prints a parsed tree in its canonical form, the text a human
// approves and whose hash an approval binds.
func Print(f *syntax.File) (string, error) {
	b := printBufs.Get().(*bytes.Buffer)
	defer putPrintBuf(b)
	if err := printInto(b, f); err != nil {
		return "", err
	}
	return b.String(), nil
}

// printInto is Print into b, which it empties first: a caller comparing
// the text with another needs no string of its own.
func printInto(b *bytes.Buffer, f *syntax.File) error {
	b.Reset()
	p := printers.Get().(*syntax.Printer)
	err := p.Print(b, f)
	printers.Put(p)
	return err
}

// printBufs hold buffers for printInto, so that a print grows none
// piecemeal; one grown past a command's usual size is let go.
var printBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func putPrintBuf(b *bytes.Buffer) {
	if b.Cap() <= 16<<10 {
		printBufs.Put(b)
	}
}

// parsers and printers hold configured ones for reuse: each Parse and
// Print starts from a reset state (the tree a parse returns is its own),
// and a new one costs its buffers, a good part of a short text's parse.
var (
	parsers = sync.Pool{New: func() any {
		return syntax.NewParser(syntax.Variant(syntax.LangPOSIX), syntax.KeepComments(true))
	}}
	printers = sync.Pool{New: func() any { return syntax.NewPrinter() }}
)

// Canonical parses src and returns the tree the interpreter will run and
// its canonical text: the text is printed from the parse of src, parsed
// again, and must print to itself. The interpreter parses exactly that
// canonical text, so the tree the analysis walks and the tree that runs are
// the same tree, read from the same bytes by the same parser.
func Canonical(src string) (*syntax.File, string, error) {
	fm, err := canonicalize(src)
	if err != nil {
		return nil, "", err
	}
	return fm.canon, fm.c, nil
}

// canonForms are the parses canonicalize derives from a text.
type canonForms struct {
	// raw is the parse of written: the text as given, or that text with
	// a final newline (canonicalize). nil when it does not parse.
	raw     *syntax.File
	written string
	// canon is the parse of the canonical text c, which prints to
	// itself; raw itself when written is already c.
	canon *syntax.File
	c     string
	// parses counts the parses made, for the tests that hold
	// canonicalize to as few as it needs.
	parses int
}

// canonicalize is Canonical's one derivation, shared by Canonical and the
// analysis (Analyzer.parseTop), with as few parses as the text needs: one
// when the text is its own canonical form, but for a final newline, and
// two otherwise (the text, then its canonical form). An error with a nil
// raw is the parser's error for src; any other error is a canonical form
// that does not parse or print stably.
//
// Print ends every text with a newline, so a text written without one
// (what agents send) is parsed as src+"\n": that text is the canonical
// form when it prints to itself, and then its parse is the canonical
// tree, parsed from the very bytes it prints to. That the canonical form
// so derived is the one derived from src (the same hash for the same
// command) rests on a newline at the end of input delimiting exactly as
// the end of input does, outside a quote (an open one fails both
// parses), a here-document, a trailing backslash (where it joins lines)
// and the bytes the parser drops or joins with a newline (NUL and CR: a
// backslash followed by either would join lines too): those texts are
// parsed as given. FuzzCanonicalShortcut compares
// canonicalize with the full parse-print-parse-print on every input.
//
// When written prints to itself it is the canonical form and raw is its
// parse: Parse and Print are deterministic, so parsing it again would
// give the same tree and the same text.
func canonicalize(src string) (canonForms, error) {
	fm := canonForms{written: src}
	if n := len(src); n > 0 && src[n-1] != '\n' && src[n-1] != '\\' && !strings.Contains(src, "<<") && !strings.ContainsAny(src, "\x00\r") {
		fm.written = src + "\n"
	}
	raw, err := Parse(fm.written)
	fm.parses++
	if err != nil && fm.written != src {
		// The parser's error for the text as given, as the long way
		// reports it.
		fm.written = src
		raw, err = Parse(src)
		fm.parses++
	}
	if err != nil {
		return fm, err
	}
	fm.raw = raw
	b := printBufs.Get().(*bytes.Buffer)
	defer putPrintBuf(b)
	if err := printInto(b, raw); err != nil {
		return fm, fmt.Errorf("print: %w", err)
	}
	//lint:ignore S1030 string(b.Bytes()) in a comparison makes no copy; b.String() does
	if string(b.Bytes()) == fm.written {
		fm.canon, fm.c = raw, fm.written
		return fm, nil
	}
	c := b.String()
	f, err := Parse(c)
	fm.parses++
	if err != nil {
		return fm, fmt.Errorf("canonical form does not parse: %w", err)
	}
	//lint:ignore S1030 as above
	if err := printInto(b, f); err != nil || string(b.Bytes()) != c {
		return fm, failf("canonical form is not stable under the parser").hint("simplify the quoting")
	}
	fm.canon, fm.c = f, c
	return fm, nil
}

// Hash is the sha256 (hex) of a canonical form: what an approval binds.
func Hash(canonical string) string {
	sum := sha256.Sum256([]byte(canonical))
	var dst [2 * sha256.Size]byte
	hex.Encode(dst[:], sum[:])
	return string(dst[:])
}

// QuoteArgv returns shell text that runs argv as one simple command of
// literal words, so an argv request is analysed and run like text.
func QuoteArgv(argv []string) (string, error) {
	words := make([]string, len(argv))
	for i, a := range argv {
		q, err := syntax.Quote(a, syntax.LangPOSIX)
		if err != nil {
			return "", fmt.Errorf("argv[%d] cannot be quoted for a POSIX shell: %w", i, err)
		}
		words[i] = q
	}
	return strings.Join(words, " "), nil
}

// IsBuiltin reports whether the interpreter runs name as a builtin rather
// than looking it up on PATH. It is the interpreter's own list, so the
// analysis and the run can never disagree about it.
func IsBuiltin(name string) bool { return interp.IsBuiltin(name) }

// vouchedBuiltins are the builtins the interpreter runs with no effect
// outside its own state and its output: they need no allowlist entry.
// Every other builtin is refused, by the analysis and at run time.
var vouchedBuiltins = map[string]bool{
	":": true, "true": true, "false": true, "cd": true, "pwd": true, "echo": true,
	"printf": true, "test": true, "[": true, "type": true, "command": true, "exec": true,
	"exit": true, "return": true, "break": true, "continue": true, "shift": true,
	"set": true, "wait": true, "export": true, "readonly": true,
}

// BuiltinRefusal returns why the interpreter must not run the builtin call
// argv (argv[0] is a builtin name), or "" when it is vouched for. The
// analysis checks the same rules on literal words before anything runs.
func BuiltinRefusal(argv []string) string {
	if f := builtinRefusal(argv); f != nil {
		return f.Error()
	}
	return ""
}

// builtinRefusal is BuiltinRefusal as a failure without a position (the
// analysis adds it), or nil.
func builtinRefusal(argv []string) *Failure {
	name := argv[0]
	if why, ok := failBuiltins[name]; ok {
		return failf("%s %s", name, why)
	}
	if !vouchedBuiltins[name] {
		return failf("%s is a builtin the interpreter does not vouch for", name)
	}
	switch name {
	case "printf":
		if len(argv) > 1 && strings.HasPrefix(argv[1], "-v") {
			return failf("printf -v assigns a variable")
		}
	case "test", "[":
		for _, a := range argv[1:] {
			if a == "-v" || a == "-R" {
				return failf("%s %s evaluates variable names", name, a)
			}
		}
	case "wait":
		for _, a := range argv[1:] {
			if strings.HasPrefix(a, "-") {
				return failf("wait with options")
			}
		}
	case "command":
		if len(argv) > 1 && strings.HasPrefix(argv[1], "-") && argv[1] != "-v" && argv[1] != "--" {
			return failf("command %s is not supported", argv[1])
		}
	case "set":
		return setRefusal(argv[1:])
	case "export", "readonly":
		for _, a := range argv[1:] {
			if a == "-p" {
				continue
			}
			n, _, _ := strings.Cut(a, "=")
			if !envName.MatchString(n) {
				return failf("%s %q is not a plain variable name", name, a)
			}
			if dangerousVar(n) {
				return failf("%s %s changes what runs", name, n).hint("dangerous environment variables cannot be set in a command")
			}
		}
	}
	return nil
}

// setRefusal checks set's options on literal words.
func setRefusal(args []string) *Failure {
	for i := 0; i < len(args); i++ {
		x := args[i]
		if x == "--" || x == "-" || len(x) < 2 || (x[0] != '-' && x[0] != '+') {
			return nil // the rest are positional parameters: data
		}
		for _, c := range x[1:] {
			if c == 'o' {
				i++
				if i >= len(args) || !interpOptions[args[i]] {
					return failf("set -o with an option that is not known to be harmless")
				}
				continue
			}
			if !interpOptions[string(c)] {
				return failf("set %c%c changes how the shell runs commands", x[0], c).hint("only -e -u -x -f -a -n and -o pipefail are allowed")
			}
		}
	}
	return nil
}

// interpOptions are the shell options the interpreter implements that
// change error handling or tracing only.
var interpOptions = map[string]bool{
	"a": true, "e": true, "f": true, "n": true, "u": true, "x": true,
	"allexport": true, "errexit": true, "noglob": true, "noexec": true, "nounset": true,
	"xtrace": true, "pipefail": true,
}

// Applied is a wrapper the runner applies itself instead of starting the
// wrapper's program: nothing named env, nice, nohup, timeout or time is ever
// executed on the strength of its name.
type Applied struct {
	// Tool is the wrapper's name (env, nice, nohup, timeout, time).
	Tool string
	// ClearEnv starts the command with an empty environment (env -i).
	ClearEnv bool
	// Unset and Set change the command's environment (env -u, NAME=VALUE).
	Unset []string
	Set   []string
	// Nice is the niceness adjustment (nice -n).
	Nice int
	// IgnoreHUP starts the command with SIGHUP ignored (nohup).
	IgnoreHUP bool
	// Timeout, Signal, KillAfter and PreserveStatus are timeout's.
	Timeout        time.Duration
	Signal         string
	KillAfter      time.Duration
	PreserveStatus bool
	// Time reports the command's times on stderr in POSIX `time -p` form.
	Time bool
	// Inner is where the wrapped command starts in the words given.
	Inner int
}

// appliedTools are the wrappers the runner applies, by name, each with the
// parser of its options. A parser reads the call's words from word 1,
// fills in what the runner applies, and returns where the wrapped command
// starts; options the runner does not implement are refused rather than
// passed to a program. ParseApplied checks that a command follows.
var appliedTools = map[string]func(c appliedCall, ap *Applied) (inner int, err error){
	"env": parseEnv, "nice": parseNice, "nohup": parseNohup, "time": parseTime, "timeout": parseTimeout,
}

// IsApplied reports whether a bare command name is a wrapper the runner
// applies itself.
func IsApplied(name string) bool { _, ok := appliedTools[name]; return ok }

// ParseApplied parses the words of an applied wrapper call (words[0] is the
// tool). static(i) says whether word i is known before the command runs;
// the interpreter passes a function that is always true. Options the runner
// does not implement are refused rather than passed to a program.
func ParseApplied(words []string, static func(int) bool) (Applied, error) {
	ap := Applied{Tool: words[0]}
	parse, ok := appliedTools[ap.Tool]
	if !ok {
		return ap, failf("%s is not a wrapper the runner applies", ap.Tool)
	}
	i, err := parse(appliedCall{words: words, static: static}, &ap)
	if err != nil {
		return ap, err
	}
	if i >= len(words) {
		return ap, failf("%s without a command", ap.Tool).hint("the runner applies %s only around a command", ap.Tool)
	}
	ap.Inner = i
	return ap, nil
}

// appliedCall is the words of an applied wrapper call as its parser reads
// them, with static as ParseApplied got it.
type appliedCall struct {
	words  []string
	static func(int) bool
}

// option returns word i, refusing a run-time value among the options.
func (c appliedCall) option(i int) (string, error) {
	if !c.static(i) {
		return "", failf("run-time value %s in the options of %s", c.words[i], c.words[0]).hint("write them literally")
	}
	return c.words[i], nil
}

// literal reports whether word i exists and is known before the run.
func (c appliedCall) literal(i int) bool { return i < len(c.words) && c.static(i) }

// parseEnv reads env's -i, -u NAME and NAME=VALUE words.
func parseEnv(c appliedCall, ap *Applied) (int, error) {
	words := c.words
	i := 1
loop:
	for ; i < len(words); i++ {
		w, err := c.option(i)
		if err != nil {
			return i, err
		}
		switch {
		case w == "--":
			i++
			break loop
		case w == "-i" || w == "-" || w == "--ignore-environment":
			ap.ClearEnv = true
		case w == "-u" || w == "--unset":
			i++
			if !c.literal(i) {
				return i, failf("env %s without a literal name", w)
			}
			ap.Unset = append(ap.Unset, words[i])
		case strings.HasPrefix(w, "--unset="):
			ap.Unset = append(ap.Unset, strings.TrimPrefix(w, "--unset="))
		case strings.HasPrefix(w, "-u") && len(w) > 2:
			ap.Unset = append(ap.Unset, w[2:])
		case strings.HasPrefix(w, "-"):
			return i, failf("env %s is not applied by the runner", w).hint("only -i, -u NAME and NAME=VALUE are supported")
		default:
			break loop
		}
	}
	for ; i < len(words); i++ {
		w, err := c.option(i)
		if err != nil {
			return i, err
		}
		name, _, ok := strings.Cut(w, "=")
		if !ok {
			break
		}
		if name == "" || dangerousVar(name) {
			return i, failf("env sets %s, which changes what runs", name).hint("dangerous environment variables cannot be set in a command")
		}
		ap.Set = append(ap.Set, w)
	}
	for _, n := range ap.Unset {
		if n == "" || dangerousVar(n) {
			// Unsetting PATH would change how the command is found.
			return i, failf("env -u %s changes what runs", n)
		}
	}
	return i, nil
}

// parseNice reads nice's adjustment (-n N, --adjustment=N, -nN, -N).
func parseNice(c appliedCall, ap *Applied) (int, error) {
	words := c.words
	i := 1
	ap.Nice = 10
	if i < len(words) {
		w, err := c.option(i)
		if err != nil {
			return i, err
		}
		val := ""
		switch {
		case w == "-n" || w == "--adjustment":
			i++
			if !c.literal(i) {
				return i, failf("nice %s without a literal number", w)
			}
			val = words[i]
			i++
		case strings.HasPrefix(w, "--adjustment="):
			val = strings.TrimPrefix(w, "--adjustment=")
			i++
		case strings.HasPrefix(w, "-n") && len(w) > 2:
			val = w[2:]
			i++
		case legacyNice.MatchString(w):
			val = strings.TrimLeft(w, "-")
			i++
		case strings.HasPrefix(w, "-") && w != "--":
			return i, failf("nice %s is not applied by the runner", w).hint("use nice -n N")
		}
		if val != "" {
			n, err := strconv.Atoi(val)
			if err != nil || n < -20 || n > 19 {
				return i, failf("nice adjustment %q is not a number from -20 to 19", val)
			}
			ap.Nice = n
		}
	}
	if c.literal(i) && words[i] == "--" {
		i++
	}
	return i, nil
}

// parseNohup takes no options (an optional "--").
func parseNohup(c appliedCall, ap *Applied) (int, error) {
	i := 1
	ap.IgnoreHUP = true
	if c.literal(i) && c.words[i] == "--" {
		i++
	}
	if c.literal(i) && strings.HasPrefix(c.words[i], "-") {
		return i, failf("nohup %s is not applied by the runner", c.words[i])
	}
	return i, nil
}

// parseTime reads time's -p (POSIX output, the only form).
func parseTime(c appliedCall, ap *Applied) (int, error) {
	words := c.words
	i := 1
	ap.Time = true
	for ; i < len(words); i++ {
		w, err := c.option(i)
		if err != nil {
			return i, err
		}
		if w == "--" {
			i++
			break
		}
		if w == "-p" || w == "--portability" {
			continue
		}
		if strings.HasPrefix(w, "-") {
			return i, failf("time %s is not applied by the runner", w).hint("use time -p")
		}
		break
	}
	return i, nil
}

// parseTimeout reads timeout's -s SIGNAL, -k DURATION, --preserve-status
// and --foreground, then its DURATION.
func parseTimeout(c appliedCall, ap *Applied) (int, error) {
	words := c.words
	i := 1
	ap.Signal = "TERM"
opts:
	for ; i < len(words); i++ {
		w, err := c.option(i)
		if err != nil {
			return i, err
		}
		var val string
		switch {
		case w == "--":
			i++
			break opts
		case w == "--preserve-status":
			ap.PreserveStatus = true
			continue
		case w == "--foreground":
			continue
		case w == "-s" || w == "-k" || w == "--signal" || w == "--kill-after":
			i++
			if !c.literal(i) {
				return i, failf("timeout %s without a literal value", w)
			}
			val = words[i]
		case strings.HasPrefix(w, "--signal="), strings.HasPrefix(w, "--kill-after="):
			w, val, _ = strings.Cut(w, "=")
		case (strings.HasPrefix(w, "-s") || strings.HasPrefix(w, "-k")) && len(w) > 2:
			w, val = w[:2], w[2:]
		case strings.HasPrefix(w, "-") && len(w) > 1:
			return i, failf("timeout %s is not applied by the runner", w)
		default:
			break opts
		}
		switch w {
		case "-s", "--signal":
			sig := strings.TrimPrefix(strings.ToUpper(val), "SIG")
			if !timeoutSignals[sig] {
				return i, failf("timeout signal %q is not supported", val).hint("use TERM, INT, HUP, KILL, QUIT or USR1/USR2")
			}
			ap.Signal = sig
		default:
			d, err := parseDuration(val)
			if err != nil {
				return i, err
			}
			ap.KillAfter = d
		}
	}
	if i >= len(words) {
		return i, failf("timeout without a duration")
	}
	if !c.static(i) {
		return i, failf("run-time value %s as timeout's duration", words[i])
	}
	d, err := parseDuration(words[i])
	if err != nil {
		return i, err
	}
	ap.Timeout = d
	return i + 1, nil
}

// timeoutSignals are the signals an applied timeout may send.
var timeoutSignals = map[string]bool{"TERM": true, "INT": true, "HUP": true, "KILL": true, "QUIT": true, "USR1": true, "USR2": true}

// maxTimeout bounds an applied timeout's durations; the run's own timeout
// applies anyway.
const maxTimeout = 30 * 24 * time.Hour

// parseDuration reads timeout's DURATION: a non-negative decimal number
// with an optional s, m, h or d suffix.
func parseDuration(s string) (time.Duration, error) {
	num, unit := s, time.Second
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 's':
			num = s[:n-1]
		case 'm':
			num, unit = s[:n-1], time.Minute
		case 'h':
			num, unit = s[:n-1], time.Hour
		case 'd':
			num, unit = s[:n-1], 24*time.Hour
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || num == "" || strings.ContainsAny(num, "eExXpP+-") {
		return 0, failf("timeout duration %q is not a number with an optional s, m, h or d suffix", s)
	}
	d := time.Duration(f * float64(unit))
	if f*float64(unit) > float64(maxTimeout) {
		d = maxTimeout
	}
	return d, nil
}

// interpretedShells are the POSIX shells whose -c payload the interpreter
// runs itself instead of starting the shell.
var interpretedShells = map[string]bool{"sh": true, "bash": true, "dash": true, "ash": true}

// ShellCall is a shell invocation the interpreter runs itself.
type ShellCall struct {
	// Payload is the -c command text.
	Payload string
	// Name is $0 and Params the positional parameters after it.
	Name   string
	Params []string
	// Options are set options to apply first ("-e", "-o", "pipefail", …).
	Options []string
	// Index is where the payload word stands in the words given.
	Index int
}

// ParseShellCall reports whether words (words[0] names sh, bash, dash or
// ash, bare or as an absolute path in a system directory) is a `-c` call
// the interpreter runs itself, and returns its parts. Options the
// interpreter does not implement, and every mode that reads files (login,
// interactive, rc files, scripts, standard input), are not interpreted:
// such a shell is started as a program and must match the allowlist.
func ParseShellCall(words []string, static func(int) bool) (ShellCall, bool) {
	var sc ShellCall
	name := words[0]
	base := name
	if strings.Contains(name, "/") {
		dir, b := splitDir(name)
		if !systemDirs[dir] {
			return sc, false
		}
		base = b
	}
	if !interpretedShells[base] {
		return sc, false
	}
	cmdMode := false
	i := 1
loop:
	for ; i < len(words); i++ {
		if !static(i) {
			return sc, false
		}
		v := words[i]
		switch {
		case v == "--" || v == "-":
			i++
			break loop
		case v == "--norc" || v == "--noprofile" || v == "--posix":
		case strings.HasPrefix(v, "--"):
			return sc, false
		case len(v) > 1 && (v[0] == '-' || v[0] == '+'):
			for j := 1; j < len(v); j++ {
				c := v[j]
				switch {
				case c == 'c' && v[0] == '-':
					cmdMode = true
				case c == 'o':
					i++
					if i >= len(words) || !static(i) || !(interpOptions[words[i]] || words[i] == "posix") {
						return sc, false
					}
					if words[i] != "posix" {
						sc.Options = append(sc.Options, string(v[0])+"o", words[i])
					}
				case interpOptions[string(c)]:
					sc.Options = append(sc.Options, string(v[0])+string(c))
				default:
					return sc, false
				}
			}
		default:
			break loop
		}
	}
	if !cmdMode || i >= len(words) || !static(i) {
		return sc, false
	}
	sc.Payload, sc.Index = words[i], i
	sc.Name = name
	if i+1 < len(words) {
		sc.Name, sc.Params = words[i+1], words[i+2:]
	}
	return sc, true
}

func splitDir(p string) (dir, base string) {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/", p[i+1:]
	}
	return p[:i], p[i+1:]
}

// Resolve finds the executable a command name runs, exactly as the analysis
// resolves it: path-qualified names against env.Cwd, bare names on
// env.PATH (absolute entries only, with the analysis's refusal of
// ambiguous relative entries). It returns "" when nothing executable is
// found. The interpreter uses it at run time, so a command is refused
// unless it resolves to an executable the analysis allowed.
func Resolve(name string, env Env) (string, error) {
	a := newAnalyzer(uncached, env)
	return a.resolve(name, a.initialCwd(), cmdCtx{})
}
