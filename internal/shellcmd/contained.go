package shellcmd

import (
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Contained is what the execution host tells the analysis about the walls
// around one run, so that constructs whose whole effect those walls hold
// are accepted instead of failing (docs/policy.md, "What the walls
// contain"). It is set only when the run goes to the guarded interpreter
// (package shellrun), which checks every start against the analysis, and
// the run's confinement holds on this host (writes only beneath
// WritableRoots). Under it, and only for text the interpreter itself runs:
//
//   - command substitution $(…) in argument position (an argument, an
//     assignment's value, a for loop's words) and as cd's operand is
//     analysed like any other text: its commands are segments, so they must
//     match, and the guard checks every start inside it. In command-name
//     position, in a redirection's target, inside a here-document and as
//     `…` it still fails;
//   - cd to a run-time value leaves the directory unknown: a later
//     relative command path or redirection target fails;
//   - a redirection reads any literal path, and writes a literal path
//     that lies beneath a writable root and outside every read-only path
//     (the persistence paths, hidden and protected sets): the jail refuses
//     the rest, and the interpreter's open check (shellrun.Plan.Contained)
//     holds the real path to the same roots when the file is opened.
//
// Everything else keeps the strict rules: eval, source, a write to a
// run-time or outside path, a dangerous variable.
type Contained struct {
	// JailHolds is the host's word that the run's confinement holds here
	// (Landlock with the ABI it needs, not unsupported=warn with layers
	// missing, not security=full without confine). False: strict rules.
	JailHolds bool
	// WritableRoots are the run's writable roots, absolute and symlinks
	// resolved (the cwd, confine.writable, the run's private tmp).
	WritableRoots []string
	// ReadOnly are paths inside those roots that stay read-only or out of
	// sight (persistence paths, hidden, protected), absolute and resolved.
	ReadOnly []string
}

// key is c as a memo key: the same walls give the same analysis.
func (c *Contained) key() string {
	if !c.on() {
		return ""
	}
	return "holds\x00" + strings.Join(c.WritableRoots, "\x00") + "\x01" + strings.Join(c.ReadOnly, "\x00")
}

func (c *Contained) on() bool { return c != nil && c.JailHolds }

// beneath reports whether p lies at or beneath one of roots (all clean and
// absolute).
func beneath(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || r == "/" || strings.HasPrefix(p, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}

// containedOK is whether the walker's text runs under the contained rules:
// the host said the walls hold, and the interpreter itself runs the text
// (a payload a real shell binary runs is never checked by the guard).
func (w *walker) containedOK() bool { return w.a.env.Contained.on() && w.base.interp }

// accept records a construct accepted under the contained rules, once.
func (a *analyzer) accept(what string) {
	if !slices.Contains(a.accepted, what) {
		a.accepted = append(a.accepted, what)
	}
}

// substs analyses the command substitutions in words (arguments,
// assignment values, loop words) as text the interpreter runs in a
// subshell at st: each inner command is a segment. Nested substitutions
// are reached through the inner text's own words.
func (w *walker) substs(st cwdState, words ...*syntax.Word) error {
	var err error
	for _, word := range words {
		if word == nil {
			continue
		}
		syntax.Walk(word, func(n syntax.Node) bool {
			if err != nil {
				return false
			}
			cs, ok := n.(*syntax.CmdSubst)
			if !ok {
				return true
			}
			if !w.containedOK() {
				err = failf("command substitution $(…)").at(cs.Pos(), "")
				return false
			}
			if cs.Backquotes {
				err = failf("command substitution `…`").at(cs.Pos(), "").hint("write $(…)")
				return false
			}
			w.a.substs[cs] = true
			w.a.accept("command substitution in argument position")
			_, _, err = w.list(cs.Stmts, st)
			return false
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// hasSubst reports whether word holds a command substitution.
func hasSubst(word *syntax.Word) bool {
	found := false
	syntax.Walk(word, func(n syntax.Node) bool {
		if _, ok := n.(*syntax.CmdSubst); ok {
			found = true
		}
		return !found
	})
	return found
}

// unanalysedSubst returns the first command substitution in f the walker
// did not analyse (one in a here-document, a case pattern, a redirection),
// or nil: the validator lets every $(…) through under the contained rules,
// and this keeps any the walker does not follow a failure.
func (a *analyzer) unanalysedSubst(f *syntax.File) *syntax.CmdSubst {
	var miss *syntax.CmdSubst
	syntax.Walk(f, func(n syntax.Node) bool {
		if cs, ok := n.(*syntax.CmdSubst); ok && !a.substs[cs] && miss == nil {
			miss = cs
		}
		return miss == nil
	})
	return miss
}

// redirects checks a statement's redirections to files under the
// contained rules (the validator let literal file targets through): a read
// of a literal path, a write beneath a writable root and outside the
// read-only paths. /dev/null, descriptors and here-documents were settled
// by the validator.
func (w *walker) redirects(rs []*syntax.Redirect, st cwdState) error {
	for _, r := range rs {
		write := false
		switch r.Op {
		case syntax.RdrIn:
		case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.RdrInOut:
			write = true
		default:
			continue
		}
		if v, ok := staticWord(r.Word); ok && v == "/dev/null" {
			continue
		}
		if !w.containedOK() {
			return failf("redirection %s%s", r.Op, wordText(r.Word)).at(r.Pos(), " reads or writes a file (only /dev/null and descriptors such as 2>&1 are allowed)")
		}
		x := wordArg(r.Word, w.a.env.Home)
		if !x.static || x.val == "" {
			return failf("redirection %s%s", r.Op, wordText(r.Word)).at(r.Pos(), " to a run-time path").hint("write the file's path literally")
		}
		p := x.val
		if !strings.HasPrefix(p, "/") {
			if st.uncertain || st.dir == "" {
				return failf("redirection %s%s", r.Op, wordText(r.Word)).at(r.Pos(), " is relative to a directory not known before the run")
			}
			p = st.dir + "/" + p
		}
		p = path.Clean(p)
		if !write {
			w.a.accept("redirection reading a file")
			continue
		}
		real := w.realTarget(p)
		c := w.a.env.Contained
		switch {
		case !beneath(p, c.WritableRoots) || !beneath(real, c.WritableRoots):
			return failf("redirection %s%s", r.Op, wordText(r.Word)).at(r.Pos(), " writes outside the run's writable roots").hint("write beneath the working directory or the run's $TMPDIR")
		case beneath(p, c.ReadOnly) || beneath(real, c.ReadOnly):
			return failf("redirection %s%s", r.Op, wordText(r.Word)).at(r.Pos(), " writes a read-only persistence path").hint("such paths stay read-only inside the writable roots")
		}
		w.a.accept("redirection writing a file inside the writable roots")
	}
	return nil
}

// realTarget is p with its directory's symlinks resolved (as far as the
// directory exists), so a link inside a root to a file outside it is seen;
// the last component is not followed here, and the interpreter refuses to
// follow it when it opens the file.
func (w *walker) realTarget(p string) string {
	dir, base := path.Split(p)
	for d := path.Clean(dir); ; d = path.Dir(d) {
		if real, err := w.a.evalSymlinks(d); err == nil {
			rest := strings.TrimPrefix(path.Clean(dir), d)
			return path.Join(real, rest, base)
		}
		if d == "/" {
			return p
		}
	}
}
