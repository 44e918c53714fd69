package shellcmd

import (
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// validate walks every node of a parsed file and fails on any construct
// whose effect cannot be known statically, wherever it hides (arguments,
// assignments, double quotes, parameter-expansion defaults, arithmetic,
// case patterns, here-document bodies). Node types not listed here fail:
// the parser and the shell that runs the text must never disagree silently.
// positional is true for a shell payload run with arguments, where $0, $1,
// "$@" … carry run-time values.
//
// contained applies the contained rules (Contained): a $(…) is let through
// for the walker to analyse (it fails what it does not follow), and so is
// a redirection to a literal file, which the walker holds to the writable
// roots.
func validate(f *syntax.File, src string, positional, contained bool) error {
	v := &validator{src: src, positional: positional, contained: contained}
	syntax.Walk(f, v.visit)
	return v.err
}

type validator struct {
	src        string
	positional bool
	contained  bool
	err        error
}

// fail records the first failure and stops the walk.
func (v *validator) fail(f *Failure) bool {
	if v.err == nil {
		v.err = f
	}
	return false
}

func (v *validator) visit(n syntax.Node) bool {
	if v.err != nil {
		return false
	}
	switch n := n.(type) {
	case nil:
		return true
	case *syntax.Word:
		return v.parts(n.Parts)
	case *syntax.File, *syntax.Block, *syntax.IfClause,
		*syntax.WhileClause, *syntax.CaseClause, *syntax.CaseItem,
		*syntax.BinaryCmd, *syntax.CallExpr:
		return true
	case *syntax.Comment:
		// The parser continues a comment ending in a backslash onto the next
		// line; shells do not, and would run that line.
		if strings.HasSuffix(n.Text, "\\") || strings.Contains(n.Text, "\n") {
			return v.fail(failf("comment ending in a backslash").at(n.Pos(), "").hint("remove the backslash"))
		}
		return true
	case *syntax.Stmt:
		if n.Coprocess || n.Disown {
			return v.fail(failf("coprocess or disown").at(n.Pos(), ""))
		}
		return true
	case *syntax.Subshell:
		// "((x))" is arithmetic in bash (which evaluates variable contents,
		// subscripts included) but two subshells in POSIX sh.
		if len(n.Stmts) > 0 {
			if inner, ok := n.Stmts[0].Cmd.(*syntax.Subshell); ok && inner.Lparen.Offset() == n.Lparen.Offset()+1 {
				return v.fail(failf("\"((\"").at(n.Pos(), " is arithmetic in bash").hint("write \"( (\" for nested subshells"))
			}
		}
		return true
	case *syntax.ForClause:
		if _, ok := n.Loop.(*syntax.WordIter); !ok {
			return v.fail(failf("unsupported for loop").at(n.Pos(), ""))
		}
		return true
	case *syntax.WordIter:
		return true
	case *syntax.Assign:
		if n.Name == nil || n.Index != nil || n.Array != nil || n.Naked || n.Append {
			return v.fail(failf("unsupported assignment").at(n.Pos(), ""))
		}
		return true
	case *syntax.Redirect:
		return v.redirect(n)
	case *syntax.Lit:
		return true
	case *syntax.SglQuoted:
		if n.Dollar {
			return v.fail(failf("$'…' quoting").at(n.Pos(), ""))
		}
		return true
	case *syntax.DblQuoted:
		if n.Dollar {
			return v.fail(failf("$\"…\" quoting").at(n.Pos(), ""))
		}
		return v.parts(n.Parts)
	case *syntax.ParamExp:
		return v.param(n)
	case *syntax.ArithmExp:
		if n.Bracket || n.Unsigned {
			return v.fail(failf("unsupported arithmetic").at(n.Pos(), ""))
		}
		if err := arithmConst(n.X); err != nil {
			return v.fail(failf("arithmetic with %v", err).at(n.Pos(), "").hint("bash evaluates variable contents, array subscripts included"))
		}
		return false
	case *syntax.CmdSubst:
		if v.contained && !n.Backquotes {
			return true // the walker analyses it, or fails
		}
		if n.Backquotes {
			return v.fail(failf("command substitution `…`").at(n.Pos(), ""))
		}
		return v.fail(failf("command substitution $(…)").at(n.Pos(), ""))
	case *syntax.ProcSubst:
		return v.fail(failf("process substitution").at(n.Pos(), ""))
	case *syntax.DeclClause:
		// Only export and readonly, as Parse makes them from plain calls:
		// literal names with optional values (BuiltinRefusal's rules).
		words := []string{n.Variant.Value}
		for _, as := range n.Args {
			if !as.Naked || as.Value == nil || as.Name != nil {
				return v.fail(failf("unsupported declaration").at(n.Pos(), ""))
			}
			val, ok := staticWord(as.Value)
			if !ok {
				return v.fail(failf("%s of a run-time value (%s)", n.Variant.Value, wordText(as.Value)).at(n.Pos(), "").hint("write NAME=value literally"))
			}
			words = append(words, val)
		}
		if n.Variant.Value != "export" && n.Variant.Value != "readonly" {
			return v.fail(failf("%s", n.Variant.Value).at(n.Pos(), ""))
		}
		if f := builtinRefusal(words); f != nil {
			return v.fail(f.at(n.Pos(), ""))
		}
		return false
	case *syntax.FuncDecl:
		return v.fail(failf("function definition").at(n.Pos(), "").hint("run the commands directly"))
	default:
		return v.fail(failf("unsupported shell syntax (%s)", strings.TrimPrefix(fmt.Sprintf("%T", n), "*syntax.")).at(n.Pos(), ""))
	}
}

// parts rejects bash's $[…] arithmetic, which a POSIX parse leaves as
// literal text: a "$" followed by "[…]", possibly in the next literal part.
func (v *validator) parts(ps []syntax.WordPart) bool {
	var b strings.Builder
	for i, p := range ps {
		if l, ok := p.(*syntax.Lit); ok {
			if b.Len() == 0 && i+1 == len(ps) {
				return v.lit(l.Value, p) // a word's only (or last) text: no copy
			}
			b.WriteString(l.Value)
			if i+1 < len(ps) {
				continue
			}
		}
		if !v.lit(b.String(), p) {
			return false
		}
		b.Reset()
	}
	return true
}

func (v *validator) lit(s string, n syntax.Node) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '$':
			if i+1 < len(s) && s[i+1] == '[' {
				return v.fail(failf("$[…] arithmetic").at(n.Pos(), ""))
			}
		}
	}
	return true
}

func (v *validator) param(p *syntax.ParamExp) bool {
	if !p.Dollar.IsValid() || p.Flags != nil || p.Excl || p.Width || p.IsSet ||
		p.Split != syntax.OptUnset || p.GlobSubst != syntax.OptUnset || p.RcExpand != syntax.OptUnset ||
		p.NestedParam != nil || p.Index != nil || len(p.Modifiers) > 0 || p.Slice != nil ||
		p.Repl != nil || p.Names != 0 || p.Param == nil {
		return v.fail(failf("unsupported parameter expansion").at(p.Pos(), ""))
	}
	if v.positional && isPositional(p.Param.Value) {
		return v.fail(failf("shell payload refers to $%s", p.Param.Value).at(p.Pos(), " while arguments follow it").hint("pass values inside the payload"))
	}
	if p.Exp != nil {
		switch p.Exp.Op {
		case syntax.AssignUnset, syntax.AssignUnsetOrNull:
			return v.fail(failf("assignment expansion ${%s%s…}", p.Param.Value, p.Exp.Op).at(p.Pos(), ""))
		}
	}
	return true
}

func isPositional(name string) bool {
	if name == "@" || name == "*" || name == "#" {
		return true
	}
	return name != "" && strings.Trim(name, "0123456789") == ""
}

func (v *validator) redirect(r *syntax.Redirect) bool {
	if syntax.Walk(r.Word, v.visit); v.err != nil {
		return false
	}
	if r.N != nil && strings.Trim(r.N.Value, "0123456789") != "" {
		return v.fail(failf("named file descriptor").at(r.Pos(), ""))
	}
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc:
		val, ok := staticWord(r.Word)
		if !ok || val == "" {
			return v.fail(failf("here-document delimiter").at(r.Pos(), " is not a literal"))
		}
		if v.continuedHeredoc(r) {
			return v.fail(failf("here-document").at(r.Pos(), " has a line ending in a backslash").hint("shells and the parser disagree on where such a body ends"))
		}
		switch heredocQuoting(r.Word) {
		case heredocMixed:
			return v.fail(failf("here-document delimiter %s", wordText(r.Word)).at(r.Pos(), " is partly quoted").hint("quote all of it, as <<'EOF', or none of it"))
		case heredocQuoted:
			// The interpreter returns a quoted delimiter's body as it
			// stands only when the parser made it one literal; anything
			// else it expands, so the analysis refuses it.
			if r.Hdoc != nil && r.Hdoc.Lit() == "" && len(r.Hdoc.Parts) > 0 {
				return v.fail(failf("here-document").at(r.Pos(), " has a quoted delimiter but a body the interpreter would expand"))
			}
		default:
			if r.Hdoc != nil {
				syntax.Walk(r.Hdoc, v.visit)
			}
		}
		return false
	case syntax.DplIn, syntax.DplOut:
		val, ok := staticWord(r.Word)
		if !ok || (val != "-" && (val == "" || strings.Trim(val, "0123456789") != "")) {
			return v.fail(failf("redirection %s%s", r.Op, wordText(r.Word)).at(r.Pos(), " is not a file descriptor (only /dev/null and descriptors such as 2>&1 are allowed)"))
		}
		return false
	case syntax.RdrIn, syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.RdrInOut:
		val, ok := staticWord(r.Word)
		if _, why := evalWord(r.Word, "/", true); v.contained && why == "" {
			return false // a literal file: the walker checks where it is
		} else if v.contained {
			return v.fail(failf("redirection %s%s", r.Op, wordText(r.Word)).at(r.Pos(), " to a path known only at run time").hint("write the file's path literally"))
		}
		if !ok || val != "/dev/null" {
			return v.fail(failf("redirection %s%s", r.Op, wordText(r.Word)).at(r.Pos(), " reads or writes a file (only /dev/null and descriptors such as 2>&1 are allowed)"))
		}
		return false
	default:
		return v.fail(failf("unsupported redirection %s", r.Op).at(r.Pos(), ""))
	}
}

// continuedHeredoc reports whether a here-document body (as the parser
// delimits it) holds a backslash-newline. Shells look for the delimiter
// line before joining such lines; the parser joins first, so it can read a
// later command line as part of the body.
func (v *validator) continuedHeredoc(r *syntax.Redirect) bool {
	if r.Hdoc == nil || len(r.Hdoc.Parts) == 0 {
		return false
	}
	start, end := int(r.OpPos.Offset()), int(r.Hdoc.End().Offset())
	if start < 0 || end > len(v.src) || start >= end {
		return true // positions we cannot check: fail closed
	}
	body := v.src[start:end]
	if i := strings.IndexByte(body, '\n'); i >= 0 {
		body = body[i:]
	}
	return strings.Contains(body, "\\\n")
}

// Here-document delimiter quoting: an unquoted delimiter's body is
// expanded, a wholly quoted one's is literal. A delimiter that mixes both
// (<<'A'B, <<"E"OF, <<”EOF) is literal to every shell but expanded by the
// interpreter, so the analysis refuses it rather than pick a side.
const (
	heredocUnquoted = iota
	heredocQuoted
	heredocMixed
)

// heredocQuoting classifies a here-document delimiter word. A literal
// holding a backslash counts as quoted only in the one common form, <<\EOF
// (the whole delimiter a single literal led by the backslash); any other
// backslash mixes quoted and unquoted characters.
func heredocQuoting(w *syntax.Word) int {
	quoted, plain := false, false
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.SglQuoted, *syntax.DblQuoted:
			quoted = true
		case *syntax.Lit:
			switch {
			case !strings.ContainsRune(p.Value, '\\'):
				plain = true
			case len(w.Parts) == 1 && strings.HasPrefix(p.Value, "\\") && !strings.ContainsRune(p.Value[1:], '\\'):
				quoted = true
			default:
				quoted, plain = true, true
			}
		default:
			plain = true
		}
	}
	switch {
	case quoted && plain:
		return heredocMixed
	case quoted:
		return heredocQuoted
	}
	return heredocUnquoted
}

// arithmConst accepts arithmetic made only of numeric constants: any name
// refers to a variable, whose contents bash evaluates recursively.
func arithmConst(x syntax.ArithmExpr) error {
	switch x := x.(type) {
	case *syntax.BinaryArithm:
		if err := arithmConst(x.X); err != nil {
			return err
		}
		return arithmConst(x.Y)
	case *syntax.UnaryArithm:
		if x.Op == syntax.Inc || x.Op == syntax.Dec {
			return fmt.Errorf("an increment")
		}
		return arithmConst(x.X)
	case *syntax.ParenArithm:
		return arithmConst(x.X)
	case *syntax.Word:
		s := x.Lit()
		if s == "" || s[0] < '0' || s[0] > '9' {
			return fmt.Errorf("a variable")
		}
		for _, c := range s {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
				return fmt.Errorf("a variable")
			}
		}
		return nil
	default:
		return fmt.Errorf("unsupported syntax")
	}
}
