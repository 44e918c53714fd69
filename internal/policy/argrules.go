package policy

import (
	"fmt"
	"path"
	"strings"
)

// ArgRule is an allowlist entry that looks at a program's arguments as well
// as its path. Pattern is matched like any allowlist pattern (MatchPattern);
// Args is a list of word globs:
//
//   - An allow rule (Deny false) allows a start of a matching program only
//     when its arguments (argv without argv[0]) match Args word for word:
//     each element matches exactly one argument ("*" any characters, "?"
//     one, everything else literally, "/" included), and an element "**"
//     matches any number of arguments (zero included). ["push", "origin",
//     "*"] allows `git push origin main`, not `git push origin main -f`.
//   - A deny rule (Deny true) refuses every start of a matching program
//     whose arguments contain Args in order, with anything between them:
//     ["push", "--force"] refuses `git push origin main --force`. A deny
//     rule wins over every allow entry, path-only ones included.
//
// Both are checked twice: by the analysis on the words it knows before the
// run (a word it cannot know never satisfies an allow rule, and may match
// any deny word), and by the run-time guard on the expanded argv of every
// start, so a substitution, a variable or a glob cannot carry an argument
// past a rule.
type ArgRule struct {
	Pattern string   `json:"pattern"`
	Args    []string `json:"args"`
	Deny    bool     `json:"deny,omitempty"`
}

// MatchWord reports whether one argument glob matches one argument: "*"
// matches any run of characters, "?" any one, and every other character
// (a "/" too) only itself. Matching respects case: `-F` is not `-f`.
func MatchWord(glob, word string) bool {
	// Iterative matcher with one backtrack point: linear enough for words.
	g, w := 0, 0
	star, mark := -1, 0
	for w < len(word) {
		switch {
		case g < len(glob) && (glob[g] == '?' || glob[g] == word[w]):
			g++
			w++
		case g < len(glob) && glob[g] == '*':
			star, mark = g, w
			g++
		case star >= 0:
			g = star + 1
			mark++
			w = mark
		default:
			return false
		}
	}
	for g < len(glob) && glob[g] == '*' {
		g++
	}
	return g == len(glob)
}

// known reports whether argument i of a start is known; dynamic nil means
// every argument is (the run-time guard's expanded argv).
func known(dynamic []bool, i int) bool { return dynamic == nil || (i < len(dynamic) && !dynamic[i]) }

// matchAllow reports whether args match rule word for word ("**" for any
// run of arguments). An unknown argument never matches, not even "*" or
// "**": it may expand to any number of words.
func matchAllow(rule, args []string, dynamic []bool) bool {
	var rec func(r, a int) bool
	rec = func(r, a int) bool {
		if r == len(rule) {
			return a == len(args)
		}
		if rule[r] == "**" {
			for k := a; k <= len(args); k++ {
				if rec(r+1, k) {
					return true
				}
				if k < len(args) && !known(dynamic, k) {
					return false
				}
			}
			return false
		}
		if a == len(args) || !known(dynamic, a) || !MatchWord(rule[r], args[a]) {
			return false
		}
		return rec(r+1, a+1)
	}
	return rec(0, 0)
}

// matchDeny reports whether args contain rule's words in order. An unknown
// argument may be (or expand to) any words, so it matches every deny word
// from where it stands on: the analysis fails closed.
func matchDeny(rule, args []string, dynamic []bool) bool {
	r := 0
	for a := 0; a < len(args) && r < len(rule); a++ {
		if !known(dynamic, a) {
			return true
		}
		if MatchWord(rule[r], args[a]) {
			r++
		}
	}
	return r == len(rule)
}

// Matches reports whether the rule matches a start of the program at
// absPath with arguments args (argv without argv[0]). dynamic marks the
// arguments the analysis cannot know (nil: all known, as at run time).
// For an allow rule a match allows the start; for a deny rule it refuses
// it.
func (r ArgRule) Matches(absPath string, args []string, dynamic []bool, home string) bool {
	if r.Deny {
		// A deny rule's pattern counts when it matches with case ignored
		// too: where that is another file, denying it is only stricter.
		return FoldMatch(r.Pattern, absPath, home).Matched && matchDeny(r.Args, args, dynamic)
	}
	if !MatchPattern(r.Pattern, absPath, home) {
		return false
	}
	return matchAllow(r.Args, args, dynamic)
}

// Check validates a rule and its inline examples, each a command line
// split on white space whose first word (the program) is not matched:
// every example must match the rule's arguments and no counter-example
// may. It returns an error naming the first example that failed, or nil.
func (r ArgRule) Check(examples, counterExamples []string) error {
	if strings.TrimSpace(r.Pattern) == "" || !CanMatch(r.Pattern) {
		return fmt.Errorf("pattern %q can never match an executable", r.Pattern)
	}
	if len(r.Args) == 0 {
		if r.Deny {
			return fmt.Errorf("a deny rule needs args (a deny rule for every use of %s is a pattern not listed)", r.Pattern)
		}
		return fmt.Errorf("args is empty: leave it out for a rule on the path alone")
	}
	for _, w := range r.Args {
		if w == "" {
			return fmt.Errorf("args holds an empty word")
		}
		if r.Deny && w == "**" {
			return fmt.Errorf(`"**" has no meaning in a deny rule (its words may already have anything between them)`)
		}
	}
	match := func(ex string) bool {
		f := strings.Fields(ex)
		if len(f) == 0 {
			return false
		}
		if r.Deny {
			return matchDeny(r.Args, f[1:], nil)
		}
		return matchAllow(r.Args, f[1:], nil)
	}
	for _, ex := range examples {
		if !match(ex) {
			return fmt.Errorf("example %q does not match args %q", ex, r.Args)
		}
	}
	for _, ex := range counterExamples {
		if match(ex) {
			return fmt.Errorf("counter-example %q matches args %q", ex, r.Args)
		}
	}
	return nil
}

// ArgRules is a compiled set of argument rules beside an Allowlist.
type ArgRules struct {
	rules []ArgRule
	home  string
}

// CompileArgRules keeps rules (already checked with ArgRule.Check) for a
// host whose user's home is home.
func CompileArgRules(rules []ArgRule, home string) *ArgRules {
	return &ArgRules{rules: rules, home: home}
}

// Len returns how many rules there are.
func (a *ArgRules) Len() int {
	if a == nil {
		return 0
	}
	return len(a.rules)
}

// Rules returns the rules, in order.
func (a *ArgRules) Rules() []ArgRule {
	if a == nil {
		return nil
	}
	return a.rules
}

// Verdict is the rules' view of one start.
type Verdict struct {
	// Denied names the deny rule that refuses the start ("pattern args…").
	Denied string
	// Allowed names the allow rule that allows it, or "".
	Allowed string
}

// Check returns the verdict on a start of absPath with args (argv without
// argv[0]); dynamic marks the arguments known only at run time (nil: all
// known).
func (a *ArgRules) Check(absPath string, args []string, dynamic []bool) Verdict {
	var v Verdict
	if a == nil || !strings.HasPrefix(absPath, "/") {
		return v
	}
	p := path.Clean(absPath)
	for _, r := range a.rules {
		if !r.Matches(p, args, dynamic, a.home) {
			continue
		}
		if r.Deny {
			return Verdict{Denied: r.String()}
		}
		if v.Allowed == "" {
			v.Allowed = r.String()
		}
	}
	return v
}

// String is how reasons name a rule: "deny /usr/bin/git push --force".
func (r ArgRule) String() string {
	s := r.Pattern + " " + strings.Join(r.Args, " ")
	if r.Deny {
		return "deny " + s
	}
	return s
}

// Permit decides one start under a path allowlist and argument rules: a
// deny rule refuses it; else a path-only entry or an allow rule allows it.
// It returns the entry that allows it ("" when none does) and, when a deny
// rule refused it, that rule.
func Permit(list *Allowlist, rules *ArgRules, absPath string, args []string, dynamic []bool) (allowedBy, deniedBy string) {
	v := rules.Check(absPath, args, dynamic)
	if v.Denied != "" {
		return "", v.Denied
	}
	if m := list.Match(absPath); m != "" {
		return m, ""
	}
	return v.Allowed, ""
}
