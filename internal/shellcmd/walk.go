package shellcmd

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// cwdState is what the analysis knows about the shell's working directory
// at one point of the text. A literal cd changes it; a cd whose success or
// order is not certain (in a branch, after a ";" instead of "&&") makes it
// uncertain, and then a relative command path fails the analysis.
type cwdState struct {
	dir       string // "" when unknown from the start (no Env.Cwd)
	uncertain bool
}

func merge(a, b cwdState) cwdState {
	if a == b {
		return a
	}
	return cwdState{dir: a.dir, uncertain: true}
}

// walker visits the statements of one parsed text in execution order.
type walker struct {
	a    *analyzer
	base cmdCtx
}

// list analyses statements in order and returns the working directory
// once the last one succeeded, and once it ran at all.
func (w *walker) list(list []*syntax.Stmt, st cwdState) (succ, after cwdState, err error) {
	succ, after = st, st
	for _, s := range list {
		succ, after, err = w.stmt(s, after)
		if err != nil {
			return succ, after, err
		}
	}
	return succ, after, nil
}

func (w *walker) stmt(s *syntax.Stmt, st cwdState) (succ, after cwdState, err error) {
	// Redirections are opened before the command runs, in the directory
	// it starts in.
	if err := w.redirects(s.Redirs, st); err != nil {
		return st, st, err
	}
	if s.Cmd == nil {
		return st, st, nil // redirections only
	}
	succ, after, err = w.cmd(s.Cmd, st)
	if err != nil {
		return succ, after, err
	}
	if s.Background {
		// An asynchronous list runs in a subshell.
		return st, st, nil
	}
	if s.Negated {
		return after, after, nil
	}
	return succ, after, nil
}

func (w *walker) cmd(c syntax.Command, st cwdState) (succ, after cwdState, err error) {
	switch c := c.(type) {
	case *syntax.CallExpr:
		return w.call(c, st)
	case *syntax.Block:
		return w.list(c.Stmts, st)
	case *syntax.Subshell:
		if _, _, err := w.list(c.Stmts, st); err != nil {
			return st, st, err
		}
		return st, st, nil
	case *syntax.BinaryCmd:
		return w.binary(c, st)
	case *syntax.IfClause:
		return w.ifClause(c, st)
	case *syntax.WhileClause:
		sc, ac, err := w.list(c.Cond, st)
		if err != nil {
			return st, st, err
		}
		body := sc
		if c.Until {
			body = ac
		}
		_, ab, err := w.list(c.Do, body)
		if err != nil {
			return st, st, err
		}
		if ac != st || ab != st {
			return st, st, failf("cd inside a loop").at(c.Pos(), "").hint("cd before the loop")
		}
		return st, st, nil
	case *syntax.ForClause:
		if it, ok := c.Loop.(*syntax.WordIter); ok {
			if dangerousVar(it.Name.Value) {
				return st, st, failf("for loop assigns %s", it.Name.Value).at(c.Pos(), ", which changes what runs")
			}
			w.a.plainAssign(it.Name.Value)
			if err := w.substs(st, it.Items...); err != nil {
				return st, st, err
			}
		}
		_, ab, err := w.list(c.Do, st)
		if err != nil {
			return st, st, err
		}
		if ab != st {
			return st, st, failf("cd inside a loop").at(c.Pos(), "").hint("cd before the loop")
		}
		return st, st, nil
	case *syntax.DeclClause:
		// export/readonly: validate checked the names; export puts them
		// in every later program's environment.
		for _, as := range c.Args {
			val, ok := staticWord(as.Value)
			if !ok || val == "-p" {
				continue
			}
			name, _, _ := strings.Cut(val, "=")
			if c.Variant.Value == "export" {
				w.a.noteEnv(name)
			} else {
				w.a.plainAssign(name)
			}
		}
		return st, st, nil
	case *syntax.CaseClause:
		after = st
		for _, it := range c.Items {
			_, a, err := w.list(it.Stmts, st)
			if err != nil {
				return st, st, err
			}
			after = merge(after, a)
		}
		return after, after, nil
	default:
		return st, st, failf("unsupported shell syntax").at(c.Pos(), "")
	}
}

func (w *walker) binary(c *syntax.BinaryCmd, st cwdState) (succ, after cwdState, err error) {
	switch c.Op {
	case syntax.AndStmt:
		sx, ax, err := w.stmt(c.X, st)
		if err != nil {
			return st, st, err
		}
		sy, ay, err := w.stmt(c.Y, sx)
		if err != nil {
			return st, st, err
		}
		return sy, merge(ax, ay), nil
	case syntax.OrStmt:
		sx, ax, err := w.stmt(c.X, st)
		if err != nil {
			return st, st, err
		}
		sy, ay, err := w.stmt(c.Y, ax)
		if err != nil {
			return st, st, err
		}
		return merge(sx, sy), merge(ax, ay), nil
	case syntax.Pipe:
		// Pipeline parts run in subshells in sh and bash, but the last one
		// runs in the current shell in zsh and ksh: a cd there leaves the
		// directory uncertain.
		if _, _, err := w.stmt(c.X, st); err != nil {
			return st, st, err
		}
		_, ay, err := w.stmt(c.Y, st)
		if err != nil {
			return st, st, err
		}
		after = merge(st, ay)
		return after, after, nil
	default:
		return st, st, failf("unsupported operator %s", c.Op).at(c.Pos(), "")
	}
}

func (w *walker) ifClause(c *syntax.IfClause, st cwdState) (succ, after cwdState, err error) {
	if len(c.Cond) == 0 { // a plain else
		return w.list(c.Then, st)
	}
	sc, ac, err := w.list(c.Cond, st)
	if err != nil {
		return st, st, err
	}
	s1, a1, err := w.list(c.Then, sc)
	if err != nil {
		return st, st, err
	}
	s2, a2 := ac, ac
	if c.Else != nil {
		if s2, a2, err = w.ifClause(c.Else, ac); err != nil {
			return st, st, err
		}
	}
	return merge(s1, s2), merge(a1, a2), nil
}

// call analyses a simple command: its assignments, then the command it
// runs (or the builtin it is).
func (w *walker) call(c *syntax.CallExpr, st cwdState) (succ, after cwdState, err error) {
	// Substitutions run before the command, in its directory; one that
	// would name the command stays a failure (command below).
	if len(c.Args) > 0 && hasSubst(c.Args[0]) {
		return st, st, failf("command substitution in command-name position").at(c.Args[0].Pos(), "").hint("name the program literally")
	}
	for _, as := range c.Assigns {
		if err := w.substs(st, as.Value); err != nil {
			return st, st, err
		}
	}
	if err := w.substs(st, c.Args...); err != nil {
		return st, st, err
	}
	for _, as := range c.Assigns {
		if dangerousVar(as.Name.Value) {
			return st, st, failf("assignment of %s", as.Name.Value).at(as.Pos(), " changes what runs").hint("dangerous environment variables cannot be set in a command")
		}
		if len(c.Args) > 0 {
			w.a.noteEnv(as.Name.Value) // in the command's environment
		} else {
			w.a.plainAssign(as.Name.Value) // exported under set -a
		}
	}
	if len(c.Args) == 0 {
		return st, st, nil
	}
	args := make([]arg, len(c.Args))
	for i, word := range c.Args {
		args[i] = wordArg(word, w.a.env.Home)
		if args[i].static && i == 0 {
			args[i].text = nameText(word, args[i].val)
		}
	}
	next := st
	ctx := w.base
	ctx.pos = c.Pos() // for messages (Failure.at) and Builtins
	ctx.contained = w.containedOK()
	if err := w.a.command(args, &next, ctx); err != nil {
		return st, st, err
	}
	if next == st {
		return st, st, nil
	}
	return next, merge(st, next), nil
}

// nameText returns a command name as written, quotes removed, keeping a
// leading "~" unexpanded.
func nameText(w *syntax.Word, val string) string {
	if l := w.Lit(); l != "" && len(w.Parts) == 1 && !containsByte(l, '\\') {
		return l
	}
	return val
}

func containsByte(s string, b byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == b {
			return true
		}
	}
	return false
}
